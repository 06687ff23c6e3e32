"""Prefect's test harness (a temporary API server on a free port), started again when its start-up health check
fails with a transport error that Prefect's own start loop does not retry.

Prefect picks the port by binding port 0 and letting it go, then starts uvicorn on it; only a refused connection
(httpx.ConnectError) is waited out. With several test processes starting servers at once, the health check once
met another process on that port and got "connection reset by peer" (httpx.ReadError), which failed the setup of a
whole module in CI. A new attempt takes a new port.

The harness's database starts as a copy of the session's migrated one (support.prefect_db) rather than empty: the
harness makes its temporary folder with prefect.testing.utilities.mkdtemp, which is wrapped here to put the copy
there under the name the harness gives its database; should Prefect change either, the copy goes unused and the
server migrates a new database, as before."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import httpx
from prefect.testing import utilities
from prefect.testing.utilities import prefect_test_harness

from support.prefect_db import TEMPLATE_DIR_ENV, migrated_database

ATTEMPTS = 3
HARNESS_DB = "prefect-test.db"  # the name prefect_test_harness gives its database in its temporary folder


def _seeded_mkdtemp(*args, **kwargs) -> str:
    folder = tempfile.mkdtemp(*args, **kwargs)
    if os.environ.get(TEMPLATE_DIR_ENV):
        shutil.copyfile(migrated_database(Path(os.environ[TEMPLATE_DIR_ENV])), Path(folder) / HARNESS_DB)
    return folder


@contextlib.contextmanager
def prefect_harness(server_startup_timeout: int = 180) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with mock.patch.object(utilities, "mkdtemp", _seeded_mkdtemp):
                    stack.enter_context(prefect_test_harness(server_startup_timeout=server_startup_timeout))
                break
            except httpx.TransportError:
                if attempt == ATTEMPTS:
                    raise
        yield
