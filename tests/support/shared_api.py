"""One Prefect API server per test process, for the tests that run `ksci evolve` in a subprocess only to get a run
(its rows, its output, its exit code) and not to check the embedded API itself, and for the test modules that run
flows in the test process (support.prefect_harness.on_shared_api).

Without it each such `ksci evolve` starts its own embedded API (ksci.embedded.EmbeddedApi), about 10 of the
20 CPU seconds a short simulated evolution costs on 2 cores; with PREFECT_API_URL set, ksci uses the server it names
instead (ksci/cli.py: a server of the user's wins), as a user's deployment does. The server is the one ksci embeds
(the same command, the ephemeral set of services), on a PREFECT_HOME of its own with the session's migrated
database (support.prefect_db), started at the first test that asks and ended with the test process (its
parent-death signal). Tests that check
the embedded API (that it starts, that it ends with ksci, that a kill -9 takes it along) keep it: they do not ask.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

from ksci.embedded import EMBEDDED_CLIENT_RETRIES, EmbeddedApi
from support.prefect_db import seeded_home

# ksci waits 90 s for its embedded API; a test process on a loaded 2-core machine once waited longer for this one
# (a setup error, not a finding), so the wait here is a guard against a server that never answers.
STARTUP_TIMEOUT = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
STARTUP_TIMEOUT_S = 600


def start_shared_api(folder: Path) -> tuple[EmbeddedApi, str]:
    """Start the server (its home and log in `folder`) and wait until it answers; the server and its API URL. The
    test process's own environment is left as it was (EmbeddedApi.start sets PREFECT_API_URL, PREFECT_UI_URL and the
    client's retries there for ksci's own process)."""
    api = EmbeddedApi(folder / "server.log")
    settings = {"PREFECT_HOME": str(seeded_home(folder / "home")), STARTUP_TIMEOUT: str(STARTUP_TIMEOUT_S)}
    with mock.patch.dict(os.environ, settings):  # the whole environment as it was afterwards
        api.start()
        api.wait_ready()
    return api, api.url


def with_shared_api(env: dict[str, str], url: str) -> dict[str, str]:
    """`env` for a `ksci evolve` that uses the shared server: its API URL, no UI URL (as the embedded API's runs
    have none: no "View at" link to a server the user cannot open) and the client's retries the embedded API sets
    (its SQLite answers 503 while busy; a value in `env` wins)."""
    retries = env.get("PREFECT_CLIENT_MAX_RETRIES", str(EMBEDDED_CLIENT_RETRIES))
    return {**env, "PREFECT_API_URL": url, "PREFECT_UI_URL": "", "PREFECT_CLIENT_MAX_RETRIES": retries}
