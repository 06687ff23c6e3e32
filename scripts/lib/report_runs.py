"""What a multi-worker check left behind: each flow run's final state and worker, and the lineage store's rows.

Usage: python scripts/lib/report_runs.py TIMEOUT_S STORE NAME...   (PREFECT_API_URL points at the server)

Waits (at most TIMEOUT_S) until every named flow run is final, then prints `flow run NAME: STATE on WORKER`
per run (and, for a run that did not complete, why: its state message, its failed generations' and their logged
warnings and errors) and one `lineage:` line that counts the rows of every part file under STORE. Exits 0 only if every
run completed and no (run, candidate_id, generation) was written twice; 2 if runs were still unfinished.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterName,
    LogFilter,
    LogFilterFlowRunId,
    LogFilterLevel,
)
from prefect.client.schemas.objects import FlowRun

from ksci.lineage.store import KEY

POLL_SECONDS = 3
# A worker labels each flow run it submits with its name (Prefect 3.9: BaseWorker._give_worker_labels_to_flow_run).
WORKER_LABEL = "prefect.worker.name"
EXPLAIN_LOG_LINES = 20  # warnings and errors shown per failed flow run


def wait_for_runs(names: list[str], timeout_s: float) -> list[FlowRun]:
    """Poll until every named run is in a final state or the time is up; the runs as last read, by name."""
    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=names)))
            if (len(runs) == len(names) and all(_is_final(r) for r in runs)) or time.monotonic() > deadline:
                return sorted(runs, key=lambda r: r.name)
            time.sleep(POLL_SECONDS)


def explain_failures(runs: list[FlowRun]) -> None:
    """For each run that did not complete, and each of its generations' flow runs (`NAME-gen-G`) that did not:
    its state and state message, then the last warnings and errors it logged."""
    failed = [r for r in runs if not r.state or not r.state.is_completed()]
    if not failed:
        return
    with get_client(sync_client=True) as client:
        for run in failed:
            children = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=f"{run.name}-gen-"))
            )
            for each in [run, *(c for c in children if not c.state or not c.state.is_completed())]:
                state = each.state
                print(f"--- {each.name}: {state.type.value if state else 'no state'}: {state.message if state else ''}")
                logs = client.read_logs(
                    LogFilter(flow_run_id=LogFilterFlowRunId(any_=[each.id]), level=LogFilterLevel(ge_=30)), limit=200
                )
                for log in logs[-EXPLAIN_LOG_LINES:]:
                    print(f"    {log.timestamp:%H:%M:%S} {log.name}: {log.message[:2000]}")


def written_keys(store: Path) -> tuple[list[tuple], int]:
    """The key of every row in every part file, as written (LineageStore.read() would drop a duplicate)."""
    parts = sorted(store.glob("*/candidates/part-*.parquet"))
    if not parts:
        return [], 0
    table = pa.concat_tables([pq.read_table(p, columns=list(KEY)) for p in parts])
    return list(zip(*(table[k].to_pylist() for k in KEY), strict=True)), len(parts)


def _is_final(run: FlowRun) -> bool:
    return run.state is not None and run.state.is_final()


def main(timeout_s: str, store: str, *names: str) -> int:
    runs = wait_for_runs(list(names), float(timeout_s))
    for run in runs:
        state = run.state.name if run.state else "no state"
        print(f"flow run {run.name}: {state} on {run.labels.get(WORKER_LABEL, 'no worker')}")
    explain_failures(runs)
    keys, parts = written_keys(Path(store))
    print(
        f"lineage: {len(keys)} rows in {parts} part files, {len(set(keys))} distinct keys, {len({k[0] for k in keys})} runs"
    )
    if len(runs) < len(names) or not all(_is_final(r) for r in runs):
        print(f"flow runs still unfinished after {timeout_s} s")
        return 2
    return 0 if all(r.state.is_completed() for r in runs) and len(keys) == len(set(keys)) > 0 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
