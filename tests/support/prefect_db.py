"""A Prefect database migrated once per test session and copied into each PREFECT_HOME that a test gives a Prefect
server of its own (`ksci evolve`'s embedded API, `prefect server start`, Prefect's test harness).

A server that finds no database creates it and runs every migration first: `prefect server database upgrade -y`
took 16 s of CPU on a new PREFECT_HOME and 7 s on a migrated one (2 busy cores), so each new database cost about
9 s of CPU, paid by every test that started a server on a home of its own. The copy is the database as `make setup`
leaves data/prefect/prefect.db: migrated and empty, so a test still starts from nothing recorded."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

TEMPLATE_DIR_ENV = "KSCI_TEST_PREFECT_DB_DIR"  # where the migrated database is kept: set by tests/conftest.py
DB_NAME = "prefect.db"  # Prefect's SQLite database under PREFECT_HOME (its default connection URL)


def migrated_database(folder: Path) -> Path:
    """The migrated, empty database in `folder`, made by the first process that asks (a file lock in `folder`:
    pytest-xdist's workers share it) and reused by the others. Named for the installed Prefect, whose migrations
    it holds."""
    template = folder / f"prefect-{version('prefect')}.db"
    with open(str(template) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not template.exists():
            home = folder / "prefect-db-home"
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
            env["PREFECT_HOME"] = str(home)
            prefect = Path(sys.executable).parent / "prefect"
            subprocess.run(
                [str(prefect), "server", "database", "upgrade", "-y"], env=env, check=True, capture_output=True
            )
            shutil.copyfile(home / DB_NAME, str(template) + ".tmp")
            os.replace(str(template) + ".tmp", template)
    return template


def seeded_home(home: Path) -> Path:
    """`home`, made if missing, with a copy of the session's migrated database as its prefect.db unless it has one
    (the database is made at the first call). Outside tests/conftest.py the server makes its own, as before."""
    home.mkdir(parents=True, exist_ok=True)
    folder = os.environ.get(TEMPLATE_DIR_ENV)
    if folder and not (home / DB_NAME).exists():
        shutil.copyfile(migrated_database(Path(folder)), home / DB_NAME)
    return home
