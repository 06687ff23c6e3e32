"""What the orchestration itself costs, read from Prefect's record of a finished evolution.

For every `evolve-generation` flow run: its wall time; the time covered by no compile, verify or benchmark
task (the orchestration's own cost), per candidate and as a share of the generation; and how long the GPU
stood idle (no verify or benchmark running) while compiles ran. Run it with the same PREFECT_HOME (or
PREFECT_API_URL) as the evolution:  python benchmarks/orchestration_cost.py [--last N]
"""

from __future__ import annotations

import argparse

from ksci.embedded import configure_prefect

configure_prefect()

from prefect.client.orchestration import get_client  # noqa: E402
from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterId  # noqa: E402
from prefect.client.schemas.sorting import FlowRunSort  # noqa: E402

STAGES = ("compile", "verify-and-benchmark")  # task names, less the run counter Prefect appends


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def minus_length(base: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Length of union(base) not covered by union(cover)."""
    return union_length(base + cover) - union_length(cover)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--last", type=int, default=10, help="how many recent generations")
    args = parser.parse_args()
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["evolve-generation"])),
            sort=FlowRunSort.START_TIME_DESC,
            limit=args.last,
        )
        print(
            f"{'generation run':24s} {'wall s':>7s} {'cands':>5s} {'orch s/cand':>11s} {'orch %':>7s} "
            f"{'GPU idle while compiling s':>27s}"
        )
        for run in reversed(runs):
            if run.start_time is None or run.end_time is None:
                continue
            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
            spans = {stage: [] for stage in STAGES}
            for t in tasks:
                stage = t.name.rsplit("-", 1)[0]
                if stage in spans and t.start_time and t.end_time:
                    spans[stage].append((t.start_time.timestamp(), t.end_time.timestamp()))
            wall = (run.end_time - run.start_time).total_seconds()
            work = union_length(spans["compile"] + spans["verify-and-benchmark"])
            gpu = spans["verify-and-benchmark"]
            candidates = max(1, len(spans["compile"]))
            idle = minus_length(spans["compile"], gpu)
            print(
                f"{run.name:24s} {wall:7.1f} {candidates:5d} {(wall - work) / candidates:11.2f} "
                f"{100 * (wall - work) / wall:6.1f}% {idle:27.1f}"
            )


if __name__ == "__main__":
    main()
