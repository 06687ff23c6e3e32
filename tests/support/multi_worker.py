"""scripts/check_multi_worker.sh run and judged for tests/test_multi_worker.py (SQLite) and
tests/test_multi_worker_postgres.py (PostgreSQL): two files, so that pytest-xdist runs the two checks, minutes
each, side by side on two workers (their ports differ)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# Two workers and four runs: the least that still shows runs spreading and sharing one store (the script's defaults,
# three and six, are the set-up docs/deployment.md describes); each run costs three flow-run processes.
WORKERS, RUNS = 2, 4
ROWS_PER_RUN = 2 * 3  # the `simulated` deployment in prefect.yaml: 2 generations of 3 children


def run_check(script: str, port: str) -> subprocess.CompletedProcess:
    """Run `script` (WORKERS workers, RUNS runs) on `port` and check that the runs spread and share one store."""
    out = subprocess.run(
        ["bash", script, port, str(WORKERS), str(RUNS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert_spread_and_shared(out)
    return out


def assert_spread_and_shared(out: subprocess.CompletedProcess) -> None:
    report = "\n".join(
        line
        for line in out.stdout.splitlines()
        if re.match(r"(flow run|lineage|triggered|\d+ workers|--- multi-|    )", line)
    )
    assert out.returncode == 0, report + "\n---\n" + out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{WORKERS} workers polling the pool" in out.stdout
    runs = dict(re.findall(r"^flow run (\S+): Completed on (\S+)$", out.stdout, re.M))
    assert sorted(runs) == [f"multi-{i}" for i in range(1, RUNS + 1)], out.stdout
    assert set(runs.values()) <= {f"worker-{i}" for i in range(1, WORKERS + 1)}
    assert len(set(runs.values())) >= 2, f"all runs went to one worker: {runs}"
    # Every row there (none lost), none twice: each part file's rows counted, not LineageStore.read()'s.
    rows = RUNS * ROWS_PER_RUN
    assert f"lineage: {rows} rows in " in out.stdout and f"{rows} distinct keys, {RUNS} runs" in out.stdout
