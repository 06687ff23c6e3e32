"""tests/test_multi_worker.py's check with the Prefect server backed by PostgreSQL
(scripts/check_multi_worker_postgres.sh), the database docs/deployment.md recommends for several GPU hosts."""

import glob
import os
import re
import shutil

import pytest
from support.multi_worker import RUNS, run_check


def _postgres_missing() -> str | None:
    """Why the PostgreSQL check cannot run here (None if it can): `make setup` installs Debian's postgresql."""
    if os.environ.get("KSCI_PG_BIN") or glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb"):
        return None
    return "PostgreSQL is not installed (apt-get install postgresql, or make setup)"


@pytest.mark.slow
def test_the_same_on_a_prefect_server_backed_by_postgresql():
    missing = _postgres_missing()
    if missing:
        if os.environ.get("KSCI_REQUIRE_TOOLCHAINS") == "1":  # CI: make setup installed it, so this must run
            pytest.fail(f"KSCI_REQUIRE_TOOLCHAINS=1 but {missing}")
        pytest.skip(missing)
    out = run_check("scripts/check_multi_worker_postgres.sh", "4272")
    assert re.search(r"^postgresql \S+ on 127\.0\.0\.1:\d+, database prefect$", out.stdout, re.M), out.stdout
    # The server kept its state in PostgreSQL: every triggered run is there, completed (and its generations).
    counts = re.search(
        rf"^postgresql: (\d+) flow runs in the server's database, (\d+) of the {RUNS} triggered", out.stdout, re.M
    )
    assert counts, out.stdout[-3000:]
    assert int(counts[2]) == RUNS and int(counts[1]) >= RUNS * 3  # each evolution and its 2 generations
