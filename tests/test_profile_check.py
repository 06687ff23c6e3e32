"""benchmarks/profile_check.sh on CPU, as far as a stand-in `ncu` allows (issue 29): `ksci profile --keep-csv`
keeps what it profiled (request.json, library.txt, command.txt) beside the CSV, and the script's hand-run ncu gets
exactly that library's request, the sections and the tensor-pipe metric the digest names, then prints the digest
and ncu's matching lines side by side. The real comparison runs on an H100/H200 (the integrator's run).

The stand-in ncu answers --version; asked for a CSV (--log-file) it writes the hand-written H100 raw page kept in
tests/data/profile/; asked for the details page (the hand run) it prints a few lines in ncu's details format and
records its arguments, so the test can see what was run. The source is compiled for real (nvcc)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "profile" / "ncu_raw_handwritten_h100.csv"
DETAILS = """\
==PROF== Connected to process 4242
  void wgmma_kernel(...) (132, 1, 1)x(384, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Compute (SM) Throughput                %        71.20
    Memory Throughput                      %        38.40
    Section: Warp State Statistics
    Warp Cycles Per Issued Instruction  cycle         3.61
    smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio  inst  1.47
    sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active  %  61.80
    Section: Occupancy
    Achieved Occupancy                     %        18.60
"""


def _stand_in_ncu(folder: Path) -> Path:
    (folder / "details.txt").write_text(DETAILS)
    path = folder / "ncu"
    path.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && echo "Version 2025.1.1.0 (build 0) (stand-in)" && exit 0\n'
        'for a in "$@"; do [ "$a" = --log-file ] && csv=1; done\n'
        f'if [ -n "$csv" ]; then while [ $# -gt 0 ]; do [ "$1" = --log-file ] && cp "{SAMPLE}" "$2"; shift; done; '
        "exit 0; fi\n"
        f'printf "%s\\n" "$@" > "{folder}/hand_args.txt"\ncat "{folder}/details.txt"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.nvcc
@pytest.mark.slow
def test_profile_check_runs_ncu_by_hand_on_the_library_ksci_profiled(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in_ncu(bin_dir)
    source = tmp_path / "wgmma.cu"
    ksci = [str(ROOT / ".venv" / "bin" / "python"), "-m", "ksci.cli"]
    rendered = ["render", "--problem", "fp8_gemm_kmajor", "--template", "wgmma", "--target", "cuda", "-o", source]
    subprocess.run([*ksci, *map(str, rendered)], check=True, cwd=ROOT, timeout=120)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(ROOT / "benchmarks" / "profile_check.sh"), "fp8_gemm_kmajor", str(source), str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    kept = out / "ncu"
    request = json.loads((kept / "request.json").read_text())
    library = (kept / "library.txt").read_text().strip()
    assert Path(library).is_file() and Path(library).name == Path(request["library"]).name
    assert (
        request["problem"] == "fp8_gemm_kmajor" and "--nvtx-include ksci_profile/" in (kept / "command.txt").read_text()
    )

    hand = (bin_dir / "hand_args.txt").read_text().splitlines()
    assert hand[-3:] == [hand[-3], "ksci.profile.runner", str(out / "hand" / "request.json")]
    assert json.loads((out / "hand" / "request.json").read_text()) == request
    sections = [hand[i + 1] for i, arg in enumerate(hand) if arg == "--section"]
    assert sections == ["SpeedOfLight", "WarpStateStats", "Occupancy"]
    metrics = hand[hand.index("--metrics") + 1]
    named = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"  # the busiest in the kept CSV
    assert f"tensor pipe busy: 62.0% ({named})" in (out / "digest.txt").read_text()
    assert (
        metrics
        == f"{named},launch__registers_per_thread,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
    )
    assert (out / "ncu_hand.txt").read_text() == DETAILS

    lines = done.stdout.splitlines()
    tensor = lines.index(next(line for line in lines if line.startswith("digest: tensor pipe busy: 62.0%")))
    assert "61.80" in lines[tensor + 1] and lines[tensor + 1].startswith("   ncu: ")
    stalls = next(i for i, line in enumerate(lines) if line.startswith("digest: top stalls"))
    assert "dispatch_stall 1.48" in lines[stalls] and any("dispatch_stall" in line for line in lines[stalls + 1 :])
