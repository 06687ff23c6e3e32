"""Settings for Prefect's embedded default: an ephemeral API whose state lives under the project's data/."""

from __future__ import annotations

import os

from ksci import PROJECT_ROOT


def configure_prefect() -> None:
    """Call before importing prefect. Explicit settings in the environment (or PREFECT_API_URL) win."""
    os.environ.setdefault("PREFECT_HOME", str(PROJECT_ROOT / "data" / "prefect"))
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "true")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # Concurrency-slot leases on disk, as prefect.toml sets them for a server (no GPU slots since ksci/devices.py
    # locks the GPUs; kept so that the embedded API and a server keep leases alike).
    os.environ.setdefault(
        "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE", "prefect.server.concurrency.lease_storage.filesystem"
    )
