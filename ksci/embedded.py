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
    # Slot leases on disk, not in the API process's memory: a killed run's GPU slots can then be found and
    # released by the next run (tasks/gpu.py), since the ephemeral API runs no repossessor service.
    os.environ.setdefault(
        "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE", "prefect.server.concurrency.lease_storage.filesystem"
    )
