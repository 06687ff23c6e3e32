"""Two workers on one work pool, four evolutions at once, one lineage store: scripts/check_multi_worker.sh, with
the Prefect server on SQLite (its default). On PostgreSQL, the database docs/deployment.md recommends for several
GPU hosts: tests/test_multi_worker_postgres.py.

One machine over loopback stands in for several GPU hosts (docs/deployment.md); the GPU is the simulator.
"""

import pytest
from support.multi_worker import run_check


@pytest.mark.slow
def test_runs_spread_over_workers_and_share_one_store():
    run_check("scripts/check_multi_worker.sh", "4271")
