"""benchmarks/evolution_result.py on CPU, before it touches a GPU: a run the store does not hold is named in a one-line
error that lists the runs it does hold (on a fresh device machine the store of an earlier call is gone, and the script
used to fail with pandas' IndexError); its table gives each shape's share of the speed of light (issue 28's 72 % goal
is read from it), from verdicts made up here."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from support.benchmark_scripts import load_benchmark

from ksci.evaluate.results import ShapeTiming, Status, Timing, Verdict

ROOT = Path(__file__).resolve().parent.parent


def _run(store: Path, run: str) -> subprocess.CompletedProcess:
    script = ROOT / "benchmarks" / "evolution_result.py"
    return subprocess.run(
        [sys.executable, str(script), "--store", str(store), "--run", run], capture_output=True, text=True, cwd=ROOT
    )


def test_a_missing_run_is_named_with_the_runs_the_store_holds(tmp_path):
    result = _run(tmp_path, "throughput-kmajor")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "no candidates of run 'throughput-kmajor'" in result.stderr
    assert "runs there: none" in result.stderr


def _module():
    return load_benchmark("evolution_result")


def _verdict(times: dict, vendor: dict | None, sol: dict) -> Verdict:
    timings = [
        ShapeTiming(
            shape={"m": m, "n": n, "k": k},
            kernel=Timing(us, 0.0, us, 10),
            vendor=Timing(vendor[(m, n, k)], 0.0, vendor[(m, n, k)], 10) if vendor else None,
            speed_of_light_us=sol[(m, n, k)],
        )
        for (m, n, k), us in times.items()
    ]
    geo = math.prod(times.values()) ** (1 / len(times))
    sol_geo = math.prod(sol.values()) ** (1 / len(sol)) if all(sol.values()) else None
    return Verdict(Status.OK, "p", "cuda", timings=timings, geomean_us=geo, speed_of_light_geomean_us=sol_geo)


def test_the_table_gives_the_evolved_kernels_and_the_vendors_share_of_the_speed_of_light():
    sol = {(6144, 4608, 7168): 205.09, (1024, 512, 7168): 3.80}
    vendor = {(6144, 4608, 7168): 320.56, (1024, 512, 7168): 25.25}
    seed = _verdict({(6144, 4608, 7168): 338.21, (1024, 512, 7168): 17.57}, None, sol)
    best = _verdict({(6144, 4608, 7168): 297.78, (1024, 512, 7168): 17.50}, vendor, sol)
    lines, per_shape, vendor_geo = _module().table(seed, best)
    assert "evolved % SoL" in lines[0] and "vendor % SoL" in lines[0]
    big = per_shape["6144x4608x7168"]
    assert round(big["evolved_pct_sol"], 1) == 68.9
    assert round(big["vendor_pct_sol"], 1) == 64.0
    row = next(line for line in lines if line.startswith("6144x4608x7168"))
    assert row.split()[5:8] == ["68.9", "64.0", "0.93"]
    assert math.isclose(vendor_geo, (320.56 * 25.25) ** 0.5)
    assert lines[-1].startswith(f"evolved vs vendor: {best.geomean_us / vendor_geo:.3f}x")


def test_a_shape_without_a_vendor_time_or_speed_of_light_shows_nan_not_an_error():
    shape = (64, 64, 128)
    seed = _verdict({shape: 2.0}, None, {shape: None})
    best = _verdict({shape: 1.0}, None, {shape: None})
    lines, per_shape, _ = _module().table(seed, best)
    assert math.isnan(per_shape["64x64x128"]["evolved_pct_sol"])
    assert math.isnan(per_shape["64x64x128"]["vendor_pct_sol"])
    assert "nan" in lines[1]
