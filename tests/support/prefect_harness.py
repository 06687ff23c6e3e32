"""Prefect's test harness (a temporary API server on a free port), started again when its start-up health check
fails with a transport error that Prefect's own start loop does not retry.

Prefect picks the port by binding port 0 and letting it go, then starts uvicorn on it; only a refused connection
(httpx.ConnectError) is waited out. With several test processes starting servers at once, the health check once
met another process on that port and got "connection reset by peer" (httpx.ReadError), which failed the setup of a
whole module in CI. A new attempt takes a new port.

The harness's database starts as a copy of the session's migrated one (support.prefect_db) rather than empty: the
harness makes its temporary folder with prefect.testing.utilities.mkdtemp, which is wrapped here to put the copy
there under the name the harness gives its database; should Prefect change either, the copy goes unused and the
server migrates a new database, as before.

`on_shared_api` points this process's flows at the test process's shared Prefect API instead (support.shared_api,
the `shared_prefect_api` fixture), as the harness points them at its own server: the modules whose flows only need
an API use it, so that a test process starts one server for them all, not one per module (about 7 CPU s each)."""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import httpx
import prefect.context
import prefect.settings
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.testing import utilities
from prefect.testing.utilities import prefect_test_harness
from prefect.utilities.asyncutils import run_coro_as_sync

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


@contextlib.contextmanager
def on_shared_api(api_url: str) -> Iterator[None]:
    """Flows run in this process use the Prefect API at `api_url` (the shared server of support.shared_api): its URL
    in the settings and in the process-global settings context, as prefect_test_harness sets its own server's; at
    the end the logs and events in flight are sent (drained), as the harness does before it stops its server."""
    updates = {prefect.settings.PREFECT_API_URL: api_url}
    with prefect.settings.temporary_settings(updates=updates):
        with prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
            try:
                yield
            finally:
                run_coro_as_sync(_drain())


async def _drain() -> None:
    """prefect_test_harness's drain: the API log worker's queue (if it ever started), then the events workers'."""
    with contextlib.suppress(RuntimeError):  # the log worker never started
        result = APILogWorker.instance().drain()
        if inspect.isawaitable(result):
            await result
    result = EventsWorker.drain_all()
    if inspect.isawaitable(result):
        await result
