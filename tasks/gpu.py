"""Per-GPU global concurrency limits: each GPU runs one candidate at a time, and a candidate takes any free GPU."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.server.concurrency.lease_storage.filesystem import ConcurrencyLeaseStorage
from prefect.settings import get_current_settings
from prefect.utilities.asyncutils import run_coro_as_sync

PROBE_TIMEOUT_S = 1.0  # how long one look at a busy GPU's slot waits before trying the next GPU
LEASE_S = 60.0  # a slot whose holder was killed is free again this long after the holder's last renewal
REPOSSESS_EVERY_S = 5.0


def gpu_limit_name(gpu: str) -> str:
    """One limit per GPU of each host: `ksci-gpu-<host>-<index>` (the host as `hostname` says it)."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-") or "host"
    return f"ksci-gpu-{host}-{gpu}"


def ensure_gpu_limit(gpu: str) -> None:
    """Create the limit if it does not exist; `strict=True` users fail loudly without it."""
    name = gpu_limit_name(gpu)
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            except ObjectAlreadyExists:
                pass  # another flow run starting at the same moment created it


@contextmanager
def any_free_gpu(gpus: list[str]) -> Iterator[str]:
    """Hold the slot of the first GPU that is free (waiting until one is) and say which GPU it is.

    The limits are Prefect's, so this holds across the flows and workers of this host that share one Prefect
    server; other hosts have limits of their own names.
    """
    last_repossession = time.monotonic()
    while True:
        for gpu in gpus:
            stack = ExitStack()
            try:
                stack.enter_context(
                    concurrency(
                        gpu_limit_name(gpu),
                        occupy=1,
                        timeout_seconds=PROBE_TIMEOUT_S,
                        strict=True,
                        lease_duration=LEASE_S,
                    )
                )
            except TimeoutError:
                continue
            with stack:
                yield gpu
            return
        if time.monotonic() - last_repossession > REPOSSESS_EVERY_S:
            repossess_expired_leases()
            last_repossession = time.monotonic()
        time.sleep(0.2)


def repossess_expired_leases() -> int:
    """Free the slots of holders that died (their lease expired unrenewed); returns how many leases were freed.

    A Prefect server does this itself (its repossessor service), but the embedded ephemeral API runs no such
    service, so after a `kill -9` of `ksci evolve` its GPU slots would stay taken and a rerun would wait for
    ever. With the embedded API, ksci keeps leases on disk under PREFECT_HOME (ksci.embedded), where a later
    process finds the expired ones and releases them through the API.
    """
    settings = get_current_settings()
    if settings.api.url or not settings.server.concurrency.lease_storage.endswith(".filesystem"):
        return 0
    expired = run_coro_as_sync(ConcurrencyLeaseStorage().read_expired_lease_ids())
    with get_client(sync_client=True) as client:
        for lease_id in expired:
            client.release_concurrency_slots_with_lease(lease_id)
    return len(expired)
