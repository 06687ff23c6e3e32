"""Per-GPU global concurrency limits: each GPU runs one candidate at a time, and a candidate takes any free GPU.

Within one process, candidates of older generations go first (GPU_PRIORITY): when generations overlap
(`evolve(overlap=...)`), the oldest one finishes soonest, and the generation waiting on it can start compiling.
"""

from __future__ import annotations

import itertools
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from uuid import UUID

import certifi
import httpx
from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.client.schemas.responses import ConcurrencyLimitWithLeaseResponse
from prefect.concurrency._events import emit_concurrency_acquisition_events, emit_concurrency_release_events
from prefect.concurrency._leases import maintain_concurrency_lease
from prefect.exceptions import MissingContextError, ObjectAlreadyExists, ObjectNotFound
from prefect.server.concurrency.lease_storage.filesystem import ConcurrencyLeaseStorage
from prefect.settings import get_current_settings
from prefect.utilities.asyncutils import run_coro_as_sync

TAKE_TIMEOUT_S = 10.0  # how long one request for a slot that looked free, or its release, may take
# How often a waiting candidate looks for a free slot: the longest a GPU that another process freed waits for
# this one's candidates (one that this process frees is looked at once: _FREED).
POLL_S = 0.1
LEASE_S = 60.0  # a slot whose holder was killed is free again this long after the holder's last renewal
REPOSSESS_EVERY_S = 5.0  # also how often a wait that finds every slot busy asks whether the API is there at all
API_GRACE_S = 30.0  # a Prefect API that has not answered for this long ends the wait (a restart takes ~15 s)
# A slot seen taken this long by no candidate of this process gets a warning: longer than any one candidate holds
# it (ksci.evaluate.pipeline.EvaluationOptions.timeout_s, 900 s, kills a harness), so it is another run's or stuck.
STUCK_HINT_S = 1200.0
WATCH_GAP_S = 30.0  # ... taken at every look, with no longer gap than this between looks (it may have been free)
# Waiters per GPU told their turn is near (any_free_gpu's on_turn: a candidate takes its harness process then, a
# spare that started earlier, or one started now if none is left). A verification holds a GPU for 1 to 3 s, less
# than Python and torch take to start (2 to 7 s on a busy host), so a harness started by the next in line alone
# would often still be starting when the GPU frees up. Also how many spares are kept per GPU and phase
# (tasks.stages._spares).
START_AHEAD = 2
# A Prefect server on SQLite answers a write that collided with another one with 503 (SQLITE_BUSY_SNAPSHOT), and
# Prefect's client asks again after 2 s (its back-off, not a setting): 2 s with a GPU idle, for a slot request or
# release. Those two are asked again at once instead, every BUSY_RETRY_S, this many times before the client's own
# retries take over (a server that stays busy, or one going down).
BUSY_RETRIES = 20
BUSY_RETRY_S = 0.05


# The generation a task belongs to (set in the generation flow; submitted tasks inherit it): lower goes first.
GPU_PRIORITY: ContextVar[int] = ContextVar("ksci_gpu_priority", default=0)


class _Queue:
    """The candidates of this process waiting for a GPU, by (priority, arrival); only the first `width` of them
    ask Prefect for a slot. Other processes and hosts are not ordered: Prefect's limits alone arbitrate there."""

    def __init__(self) -> None:
        self._lock, self._waiting, self._arrivals = threading.Lock(), set(), itertools.count()

    def join(self) -> tuple[int, int]:
        ticket = (GPU_PRIORITY.get(), next(self._arrivals))
        with self._lock:
            self._waiting.add(ticket)
        return ticket

    def leave(self, ticket: tuple[int, int]) -> None:
        with self._lock:
            self._waiting.discard(ticket)

    def may_ask(self, ticket: tuple[int, int], width: int) -> bool:
        with self._lock:
            return sum(1 for other in self._waiting if other < ticket) < width


_QUEUES: dict[tuple[str, ...], _Queue] = {}  # one per set of GPUs
_QUEUES_LOCK = threading.Lock()
_TAKING: dict[str, threading.Lock] = {}  # per GPU: one request for its slot at a time in this process
_HELD: set[str] = set()  # GPUs whose slot a candidate of this process holds
_TAKEN: dict[str, tuple[float, float, bool]] = {}  # GPUs seen taken by others: since, last look, warned
_SLOT_CLIENTS: dict[str, object] = {}  # by API URL: the open client of _slot_client
_FREED = threading.Condition()  # notified when a candidate of this process lets its GPU go


def _taking(gpu: str) -> threading.Lock:
    with _QUEUES_LOCK:
        return _TAKING.setdefault(gpu, threading.Lock())


def _queue_of(gpus: list[str]) -> _Queue:
    with _QUEUES_LOCK:
        return _QUEUES.setdefault(tuple(gpus), _Queue())


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
def any_free_gpu(gpus: list[str], on_turn: Callable[[], None] | None = None) -> Iterator[str]:
    """Hold the slot of the first GPU that is free (waiting until one is) and say which GPU it is.

    The limits are Prefect's, so this holds across the flows and workers of this host that share one Prefect
    server; other hosts have limits of their own names.
    A slot that cannot be had because the API is gone (a Prefect server killed or restarted) is treated as a busy
    one, so a long wait asks the API's health now and then and gives up with PrefectApiUnreachable once it has not
    answered for API_GRACE_S; without that the wait would never end.
    Of this process's waiters for the same GPUs, the ones with the lowest GPU_PRIORITY ask first, and only as
    many as there are GPUs; a GPU freed by this process is asked for at once, one freed by another within POLL_S.
    `on_turn` is called once, when fewer than START_AHEAD x len(gpus) of those waiters are ahead of this one, and
    before it first asks: a candidate takes its harness process there, while the GPUs are still busy.
    """
    last_look = time.monotonic()
    unreachable_since: float | None = None
    queue = _queue_of(gpus)
    ticket = queue.join()
    try:
        while True:
            if on_turn is not None and queue.may_ask(ticket, START_AHEAD * len(gpus)):
                on_turn, turn = None, on_turn
                turn()
            held = _take_one(gpus) if queue.may_ask(ticket, len(gpus)) else None
            if held is not None:
                queue.leave(ticket)
                gpu, stack = held
                with _QUEUES_LOCK:
                    _HELD.add(gpu)
                try:
                    with stack:
                        yield gpu
                finally:
                    with _QUEUES_LOCK:
                        _HELD.discard(gpu)
                    with _FREED:  # released (or failed): this process's waiters look again now, not at their poll
                        _FREED.notify_all()
                return
            if time.monotonic() - last_look > REPOSSESS_EVERY_S:
                unreachable_since = _check_api(unreachable_since)
                repossess_expired_leases()
                last_look = time.monotonic()
            with _FREED:
                _FREED.wait(POLL_S)
    finally:
        queue.leave(ticket)


def _take_one(gpus: list[str]) -> tuple[str, ExitStack] | None:
    """A GPU whose slot is free, with the stack that holds it; None when every slot is taken.

    Only a GPU whose limit shows a free slot is asked for it: the look is a read, a request is a write, and on an
    API backed by SQLite every write can collide with the run's others (a 503, asked again)."""
    with get_client(sync_client=True) as client:
        try:
            return _take_free(gpus, client)
        except Exception as exc:
            status = _http_status(exc)
            if (status is not None and status >= 500) or _caused_by(exc, httpx.TransportError):
                return None  # the API is struggling or gone: look again next poll (the health checks decide)
            raise


def _take_free(gpus: list[str], client) -> tuple[str, ExitStack] | None:
    limits = {gpu: client.read_global_concurrency_limit_by_name(gpu_limit_name(gpu)) for gpu in gpus}
    _watch_taken(limits)
    for gpu in gpus:
        # A GPU another waiter of this process is asking for is skipped, not waited for: a request that the API
        # keeps answering with 503 (asked again by _BusyRetried, then by Prefect's client after 2 s, 4 s, ...)
        # then holds up only that GPU, not the others.
        taking = _taking(gpu)
        if limits[gpu].active_slots >= limits[gpu].limit or not taking.acquire(blocking=False):
            continue
        stack = ExitStack()
        try:
            stack.enter_context(hold_slot(gpu))
        except httpx.HTTPStatusError as exc:
            if _http_status(exc) == httpx.codes.LOCKED:
                continue  # another process or waiter took it since the look
            raise  # _take_one decides: the API in trouble, or a real error
        finally:
            taking.release()
        return gpu, stack
    return None


@contextmanager
def hold_slot(gpu: str) -> Iterator[None]:
    """Take the GPU's slot (one request: a slot someone else holds is refused at once, 423 Locked), hold it, renew
    its lease while held (Prefect's own renewal; a holder killed lets it expire after LEASE_S), release it.

    What prefect.concurrency.sync.concurrency does, but with requests that are asked again at once when the API is
    busy (_slot_client), not after Prefect's 2 s; Prefect's slot-acquisition service, which that goes through,
    makes its own client, with the 2 s."""
    name = gpu_limit_name(gpu)
    response = _slot_client().increment_concurrency_slots_with_lease(
        names=[name], slots=1, mode="concurrency", lease_duration=LEASE_S
    )
    granted = ConcurrencyLimitWithLeaseResponse.model_validate(response.json())
    if not granted.limits:  # it was read just before, so it was deleted since
        raise RuntimeError(f"the GPU limit {name} does not exist any more; was it deleted while the run waited?")
    events = emit_concurrency_acquisition_events(granted.limits, 1)  # as Prefect's own, for the UI's event feed
    try:
        with maintain_concurrency_lease(granted.lease_id, LEASE_S, raise_on_lease_renewal_failure=True):
            yield
    finally:
        _slot_client().release_concurrency_slots_with_lease(granted.lease_id)
        emit_concurrency_release_events(granted.limits, 1, events)


class _BusyRetried(httpx.BaseTransport):
    """A transport that asks again, every BUSY_RETRY_S and up to BUSY_RETRIES times, a request answered with 503
    (the API's database busy), before Prefect's client sees the answer."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(BUSY_RETRIES):
            response = self._inner.handle_request(request)
            if response.status_code != httpx.codes.SERVICE_UNAVAILABLE:
                return response
            response.close()
            logging.getLogger(__name__).debug("busy API (503) for %s %s: asked again", request.method, request.url)
            time.sleep(BUSY_RETRY_S)
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def _slot_client():
    """The Prefect client for the slot requests: through _BusyRetried, TAKE_TIMEOUT_S a request. One per API and
    process, opened on first use and left open, so that a hand-off pays for no client set-up (TLS context, CSRF
    look-up: 20 to 60 ms a client on a busy host)."""
    url = get_current_settings().api.url or ""  # "": the embedded API, one per process
    with _QUEUES_LOCK:
        client = _SLOT_CLIENTS.get(url)
        if client is None:
            client = get_client(
                sync_client=True,
                httpx_settings={"transport": _BusyRetried(_api_transport()), "timeout": httpx.Timeout(TAKE_TIMEOUT_S)},
            ).__enter__()
            _SLOT_CLIENTS[url] = client
    return client


def _api_transport() -> httpx.BaseTransport:
    """A transport to the API with TLS as Prefect sets it up for its own clients (a transport given to a client
    carries the TLS settings; the client's own are not used for it)."""
    api = get_current_settings().api
    if api.tls_insecure_skip_verify:
        verify: ssl.SSLContext | bool = False
    else:
        verify = ssl.create_default_context(cafile=api.ssl_cert_file or certifi.where())
    return httpx.HTTPTransport(verify=verify, http2=api.enable_http2, retries=3)


def _watch_taken(limits: dict) -> None:
    """Warn once when a GPU's slot has been taken for STUCK_HINT_S, all that time by no candidate of this process.

    A slot can be left taken for good: by a Prefect server whose leases were in memory (its default) when it
    restarted, or by an API killed between counting a slot and writing its lease (docs/threat-model.md). Nothing
    can tell that apart from another run's candidates through Prefect's API, so this says how to check and free it.
    """
    now, stuck = time.monotonic(), []
    with _QUEUES_LOCK:
        for gpu, limit in limits.items():
            if limit.active_slots < limit.limit or gpu in _HELD:
                _TAKEN.pop(gpu, None)
                continue
            since, last, warned = _TAKEN.get(gpu, (now, now, False))
            if now - last > WATCH_GAP_S:
                since, warned = now, False  # not looked at for a while: it may have been free meanwhile
            if not warned and now - since >= STUCK_HINT_S:
                warned = True
                stuck.append(gpu)
            _TAKEN[gpu] = (since, now, warned)
    for gpu in stuck:
        name = gpu_limit_name(gpu)
        _logger().warning(
            "GPU %s: its slot %s has been taken for %.0f min, by no candidate of this process. If no other run uses "
            "this GPU (`prefect gcl inspect %s`, the Prefect UI's running flows), the slot is stuck; free it with "
            "`prefect gcl update %s --active-slots 0`",
            gpu,
            name,
            STUCK_HINT_S / 60,
            name,
            name,
        )


def _logger():
    """The task run's logger (the Prefect UI shows it), or this module's outside a run."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status behind an error of Prefect's slot acquisition (which wraps httpx's), if there is one."""
    cause = _caused_by(exc, httpx.HTTPStatusError)
    return cause.response.status_code if cause is not None else None


def _caused_by(exc: BaseException | None, kind: type[BaseException]):
    """`exc` or the first error of that kind in its chain of causes, else None."""
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__
    return exc


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
    expired = _expired_lease_ids(ConcurrencyLeaseStorage())
    with get_client(sync_client=True) as client:
        for lease_id in expired:
            client.release_concurrency_slots_with_lease(lease_id)
    return len(expired)


def _expired_lease_ids(storage: ConcurrencyLeaseStorage) -> set[UUID]:
    """The leases whose lease file says they expired.

    Not Prefect's read_expired_lease_ids: it looks only at the index (expirations.json), which the API writes
    after the lease file, so a process killed between the two writes left a slot that nothing freed
    (scripts/lease_windows.py catches it there). Prefect checks each indexed lease against its file anyway; an
    index entry without a file has no slot to free."""
    expired = set()
    now = datetime.now(UTC)
    for path in storage.storage_path.glob("*.json"):
        try:
            lease_id = UUID(path.stem)
        except ValueError:
            continue  # expirations.json, the index
        lease = run_coro_as_sync(storage.read_lease(lease_id))
        if lease is not None and lease.expiration < now:
            expired.add(lease_id)
    return expired
