"""Candidates per hour on 1 GPU against N GPUs, and proof that no two candidates ever shared a GPU.

Runs the same evolution (fresh compile cache and Prefect state each time, so nothing is reused) first on GPU 0,
then on every visible GPU, each in its own process, and prints candidates per hour for each, twice: over the
whole process (Python and Prefect start-up included, as `ksci evolve` on a laptop) and over the evolution alone
with Prefect's API already up (as a deployment, whose server runs all the time). From the lineage, it then
checks every GPU's busy windows (verify and benchmark of each candidate, recorded by the parent around each
harness process) for overlaps.
    python benchmarks/multi_gpu_throughput.py --problem fp8_gemm --generations 2 --children 12
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ksci.evaluate import visible_gpus
from ksci.lineage import LineageStore


def run_once(args, gpus: list[str], work: Path) -> dict:
    label = "gpus-" + "-".join(gpus)
    env = dict(os.environ, KSCI_COMPILE_CACHE=str(work / f"cache-{label}"), PREFECT_HOME=str(work / f"prefect-{label}"))
    store = work / f"store-{label}"
    command = [sys.executable, __file__, "--problem", args.problem, "--generations", str(args.generations)]
    command += ["--children", str(args.children), "--_evolve", ",".join(gpus), label, str(store)]
    command += ["--simulate", args.simulate] if args.simulate is not None else []
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"{label}: the evolution failed")
    timed = json.loads(done.stdout.strip().splitlines()[-1])
    rows = LineageStore(store).read(label)
    return {"label": label, "gpus": len(gpus), "wall_s": wall, "candidates": len(rows), "rows": rows, **timed}


def evolve_timed(args, gpus: str, run: str, store: str) -> None:
    """In a fresh process: start Prefect's API with an empty flow, then time the evolution alone."""
    from ksci.embedded import configure_prefect

    configure_prefect()
    from prefect import flow

    from flows.evolve import evolve

    started = time.monotonic()
    flow(name="warm-up")(lambda: None)()
    up = time.monotonic()
    evolve(
        problem=args.problem,
        generations=args.generations,
        children=args.children,
        run=run,
        store_root=store,
        gpus=gpus.split(","),
        simulate=args.simulate,
    )
    print(json.dumps({"startup_s": up - started, "evolution_s": time.monotonic() - up}))


def busy_windows(rows) -> dict[str, list[tuple[float, float, str]]]:
    windows: dict[str, list[tuple[float, float, str]]] = {}
    for _, row in rows.iterrows():
        fingerprint = json.loads(row["fingerprint_json"])
        for key in ("verify_gpu_window", "gpu_window"):
            w = fingerprint.get(key)
            if w and "start" in w:  # the simulator records which GPU, not when
                windows.setdefault(str(w["device"]), []).append((w["start"], w["end"], row["candidate_id"]))
    return windows


def overlaps(windows: list[tuple[float, float, str]]) -> int:
    ordered = sorted(windows)
    return sum(1 for a, b in zip(ordered, ordered[1:], strict=False) if b[0] < a[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--children", type=int, default=12)
    parser.add_argument("--gpus", help="the GPUs of the N-GPU run (default: every visible GPU)")
    parser.add_argument("--simulate", help="replay this recording instead of a GPU (to try the script on a CPU)")
    parser.add_argument("--_evolve", nargs=3, metavar=("GPUS", "RUN", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._evolve:
        return evolve_timed(args, *args._evolve)
    every = args.gpus.split(",") if args.gpus else visible_gpus("cuda") or visible_gpus("rocm")
    with tempfile.TemporaryDirectory(prefix="ksci-throughput-") as tmp:
        results = [run_once(args, ["0"], Path(tmp)), run_once(args, every, Path(tmp))]
    whole = results[0]["candidates"] / results[0]["wall_s"]
    alone = results[0]["candidates"] / results[0]["evolution_s"]
    print(
        "| GPUs | candidates | process s | candidates/hour | x 1 GPU | Prefect start-up s | evolution s "
        "| candidates/hour | x 1 GPU | busy windows by GPU | overlaps |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in results:
        windows = busy_windows(r["rows"])
        rate, rate_alone = r["candidates"] / r["wall_s"], r["candidates"] / r["evolution_s"]
        counts = ", ".join(f"GPU {gpu}: {len(w)}" for gpu, w in sorted(windows.items()))
        print(
            f"| {r['gpus']} | {r['candidates']} | {r['wall_s']:.1f} | {3600 * rate:.0f} | {rate / whole:.2f} "
            f"| {r['startup_s']:.1f} | {r['evolution_s']:.1f} | {3600 * rate_alone:.0f} | {rate_alone / alone:.2f} "
            f"| {counts} | {sum(overlaps(w) for w in windows.values())} |"
        )


if __name__ == "__main__":
    main()
