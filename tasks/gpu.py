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
REPOSSESS_EVERY_S = 5.0  # also how often a wait that finds every slot busy asks whether the API is there at all
API_GRACE_S = 30.0  # a Prefect API that has not answered for this long ends the wait (a restart takes ~15 s)


class PrefectApiUnreachable(RuntimeError):
    """The Prefect API stopped answering while a candidate waited for a GPU slot: the run fails, to be rerun.

    Not an EnvironmentProblem: a task retry would wait for the same absent API."""


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
    A slot that cannot be had because the API is gone (a Prefect server killed or restarted) looks the same as a
    busy one to Prefect (a TimeoutError), so a long wait asks the API's health now and then and gives up with
    PrefectApiUnreachable once it has not answered for API_GRACE_S; without that the wait would never end.
    """
    last_look = time.monotonic()
    unreachable_since: float | None = None
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
        if time.monotonic() - last_look > REPOSSESS_EVERY_S:
            unreachable_since = _check_api(unreachable_since)
            repossess_expired_leases()
            last_look = time.monotonic()
        time.sleep(0.2)


def _check_api(unreachable_since: float | None) -> float | None:
    """When the API first failed to answer (None while it answers); raises once that is API_GRACE_S ago."""
    with get_client(sync_client=True) as client:
        error = client.api_healthcheck()  # a fresh client: a refused connection fails at once, without retries
    if error is None:
        return None
    now = time.monotonic()
    if unreachable_since is not None and now - unreachable_since >= API_GRACE_S:
        url = get_current_settings().api.url or "the embedded API"
        raise PrefectApiUnreachable(
            f"waited for a GPU slot, but the Prefect API ({url}) has not answered for {now - unreachable_since:.0f} s "
            f"({type(error).__name__}: {error}); rerun this run once the server is back"
        )
    return now if unreachable_since is None else unreachable_since


def repossess_expired_leases() -> int:
    """Free the slots of holders that died (their lease expired unrenewed); returns how many leases were freed.

    A Prefect server does this itself (its repossessor service; prefect.toml keeps its leases on disk, so that they
    outlive a restart of the server), but the embedded ephemeral API runs no such service, so after a `kill -9`
    of `ksci evolve` its GPU slots would stay taken and a rerun would wait for ever. With the embedded API, ksci
    keeps leases on disk under PREFECT_HOME (ksci.embedded), where a later process finds the expired ones and
    releases them through the API.
    """
    settings = get_current_settings()
    if settings.api.url or not settings.server.concurrency.lease_storage.endswith(".filesystem"):
        return 0
    expired = run_coro_as_sync(ConcurrencyLeaseStorage().read_expired_lease_ids())
    with get_client(sync_client=True) as client:
        for lease_id in expired:
            client.release_concurrency_slots_with_lease(lease_id)
    return len(expired)
