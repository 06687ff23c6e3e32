"""How long a GPU stays idle between two candidates while others wait for it: the hand-off of ksci/devices.py.

No GPU is used: each "candidate" is a STAND-IN that takes a GPU of the pool (its lock file, as in an evolution)
and sleeps for `--hold` seconds. The stand-ins run as threads of `--processes` processes, all waiting from the
start: within a process a freed GPU wakes the next waiter at once; across processes it is seen within
ksci.devices.POLL_S. Lock files go to a temporary folder, so no other run's GPUs are touched.
    python benchmarks/gpu_slot_handoff.py --gpus 2 --jobs 12 --hold 1.0 --processes 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def stand_ins(gpus: list[str], jobs: int, hold_s: float) -> list[tuple[str, float, float]]:
    """Run `jobs` stand-ins as threads of this process; each one's (GPU, start, end) on time.monotonic's clock,
    which every process of a Linux host shares."""
    from ksci.devices import any_free_gpu

    windows: list[tuple[str, float, float]] = []

    def stand_in() -> None:
        with any_free_gpu(gpus) as gpu:
            start = time.monotonic()
            time.sleep(hold_s)
            windows.append((gpu, start, time.monotonic()))

    threads = [threading.Thread(target=stand_in) for _ in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return windows


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=2, help="how many stand-in GPUs")
    parser.add_argument("--jobs", type=int, default=12, help="stand-in candidates, all waiting from the start")
    parser.add_argument("--hold", type=float, default=1.0, help="seconds each one holds its GPU")
    parser.add_argument("--processes", type=int, default=1, help="processes the stand-ins are spread over")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)  # stand-ins of one child process
    args = parser.parse_args()
    gpus = [f"handoff-{i}" for i in range(args.gpus)]
    if args.child:
        print(json.dumps(stand_ins(gpus, args.child, args.hold)))
        return
    os.environ.setdefault("KSCI_GPU_LOCK_DIR", tempfile.mkdtemp(prefix="ksci-handoff-"))
    shares = [args.jobs // args.processes + (i < args.jobs % args.processes) for i in range(args.processes)]
    command = [sys.executable, __file__, "--gpus", str(args.gpus), "--hold", str(args.hold), "--child"]
    start = time.monotonic()
    children = [subprocess.Popen([*command, str(n)], stdout=subprocess.PIPE, text=True) for n in shares if n]
    windows = [tuple(w) for child in children for w in json.loads(child.communicate()[0])]
    wall = time.monotonic() - start  # includes each process's start (Python, ksci.devices: a fraction of a second)
    gaps = []
    for gpu in gpus:
        mine = sorted((s, e) for g, s, e in windows if g == gpu)
        gaps += [b[0] - a[1] for a, b in zip(mine, mine[1:], strict=False)]
    assert min(gaps, default=0.0) >= 0, "two stand-ins held one GPU at once"
    print("| GPUs | jobs | processes | hold s | wall s | ideal s | idle gaps | median gap s | mean gap s | max gap s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ideal = args.hold * -(-args.jobs // args.gpus)
    print(
        f"| {args.gpus} | {args.jobs} | {args.processes} | {args.hold} | {wall:.2f} | {ideal:.2f} | {len(gaps)} "
        f"| {statistics.median(gaps or [0]):.3f} | {statistics.mean(gaps or [0]):.3f} | {max(gaps, default=0):.3f} |"
    )


if __name__ == "__main__":
    main()
