"""How long a GPU stays idle between two candidates while others wait for it: the slot hand-off of tasks/gpu.py.

No GPU is used: each "candidate" is a STAND-IN that holds a GPU slot (Prefect's global concurrency limit, as in an
evolution) and sleeps for `--hold` seconds. Runs on Prefect's ephemeral API under a temporary PREFECT_HOME.
Each slot is taken once before the clock starts: Prefect starts an acquisition service per limit on first use
(about 2 s here, once per GPU and process), which is not what this measures.
    python benchmarks/gpu_slot_handoff.py --gpus 2 --jobs 12 --hold 1.0
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=2, help="how many slot-limited stand-in GPUs")
    parser.add_argument("--jobs", type=int, default=12, help="stand-in candidates, all waiting from the start")
    parser.add_argument("--hold", type=float, default=1.0, help="seconds each one holds its GPU")
    args = parser.parse_args()
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="ksci-handoff-")
    from ksci.embedded import configure_prefect

    configure_prefect()
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner

    from tasks.gpu import any_free_gpu, ensure_gpu_limit

    busy = []  # slot requests and releases the API answered 503, asked again (tasks.gpu._BusyRetried)
    counter = logging.Handler(logging.DEBUG)
    counter.emit = lambda record: busy.append(record) if "busy API" in record.getMessage() else None
    gpu_logger = logging.getLogger("tasks.gpu")
    gpu_logger.addHandler(counter)
    gpu_logger.setLevel(logging.DEBUG)

    windows: list[tuple[str, float, float]] = []
    gpus = [f"handoff-{i}" for i in range(args.gpus)]

    @task
    def stand_in() -> None:
        with any_free_gpu(gpus) as gpu:
            start = time.monotonic()
            time.sleep(args.hold)
            windows.append((gpu, start, time.monotonic()))

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=args.jobs))
    def handoff() -> float:
        for gpu in gpus:
            ensure_gpu_limit(gpu)
            with any_free_gpu([gpu]):
                pass
        start = time.monotonic()
        for future in [stand_in.submit() for _ in range(args.jobs)]:
            future.result()
        return time.monotonic() - start

    wall = handoff()
    gaps = []
    for gpu in gpus:
        mine = sorted((s, e) for g, s, e in windows if g == gpu)
        gaps += [b[0] - a[1] for a, b in zip(mine, mine[1:], strict=False)]
    print("| GPUs | jobs | hold s | wall s | ideal s | idle gaps | median gap s | mean gap s | max gap s | 503s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ideal = args.hold * -(-args.jobs // args.gpus)
    print(
        f"| {args.gpus} | {args.jobs} | {args.hold} | {wall:.2f} | {ideal:.2f} | {len(gaps)} "
        f"| {statistics.median(gaps):.2f} | {statistics.mean(gaps):.2f} | {max(gaps):.2f} | {len(busy)} |"
    )


if __name__ == "__main__":
    main()
