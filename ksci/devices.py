"""A pool of this host's GPUs: one candidate at a time per GPU, and a candidate takes any free one of its GPUs.

Each GPU has a lock file (`fcntl.flock`) in a folder that every process of the host shares (KSCI_GPU_LOCK_DIR,
by default `ksci-gpu-locks` under the system's temp folder). Whoever holds a GPU's lock runs a candidate on it:
the flows and workers of one host exclude each other, whichever Prefect server (or none) they talk to, and the OS
frees a lock when its holder dies, so a killed run leaves no GPU taken. Other hosts have GPUs and folders of their
own (the host's name is in each lock's name, should the folder be shared).

Within one process, candidates of older generations go first (GPU_PRIORITY): when generations overlap
(`evolve(overlap=...)`), the oldest one finishes soonest, and the generation waiting on it can start compiling.
Processes are not ordered among themselves: whichever tries first when a GPU frees up takes it.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import os
import re
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

LOCK_DIR_ENV = "KSCI_GPU_LOCK_DIR"
# How often a waiting candidate tries the locks: the longest a GPU that another process freed waits for this one's
# candidates (one that this process frees, or a queue that moves, wakes its waiters at once).
POLL_S = 0.1
# Waiters per GPU told their turn is near (any_free_gpu's on_turn: a candidate takes its harness process then, a
# spare that started earlier, or one started now if none is left). A verification holds a GPU for 1 to 3 s, less
# than Python and torch take to start (2 to 7 s on a busy host), so a harness started by the next in line alone
# would often still be starting when the GPU frees up. Also how many spares are kept per GPU and phase
# (tasks.stages._spares).
START_AHEAD = 2

# The generation a task belongs to (set in the generation flow; submitted tasks inherit it): lower goes first.
GPU_PRIORITY: ContextVar[int] = ContextVar("ksci_gpu_priority", default=0)

Ticket = tuple[int, int]  # (GPU_PRIORITY, arrival): the lower, the earlier in the queue


class _Queue:
    """The candidates of this process waiting for a set of GPUs, by (priority, arrival). Only the first
    len(gpus) of them try the locks, so that a later one never takes a GPU that an earlier one could have had."""

    def __init__(self) -> None:
        self._waiting: set[Ticket] = set()
        self._arrivals = itertools.count()

    def join(self) -> Ticket:
        with _CHANGED:
            ticket = (GPU_PRIORITY.get(), next(self._arrivals))
            self._waiting.add(ticket)
        return ticket

    def leave(self, ticket: Ticket) -> None:
        with _CHANGED:
            self._waiting.discard(ticket)
            _note_change()

    def ahead_of(self, ticket: Ticket) -> int:
        """How many waiters are ahead of this one."""
        with _CHANGED:
            return sum(1 for other in self._waiting if other < ticket)


# Notified whenever a candidate of this process lets a GPU go or leaves a queue: its waiters look again at once.
_CHANGED = threading.Condition()
_changes = 0  # how many times _CHANGED was notified: a waiter that saw a change while it looked does not sleep
_QUEUES: dict[tuple[str, ...], _Queue] = {}  # one per set of GPUs
_HELD: set[str] = set()  # GPUs whose lock a candidate of this process holds (not tried again meanwhile)
_RELEASES = itertools.count(1)
_RELEASED: dict[str, int] = {}  # when this process last let each GPU go (a count): free GPUs are tried oldest first


def _note_change() -> None:
    """Call with _CHANGED held."""
    global _changes
    _changes += 1
    _CHANGED.notify_all()


def _queue_of(gpus: list[str]) -> _Queue:
    with _CHANGED:
        return _QUEUES.setdefault(tuple(gpus), _Queue())


@contextmanager
def any_free_gpu(gpus: list[str], on_turn: Callable[[], None] | None = None) -> Iterator[str]:
    """Hold the lock of a GPU of `gpus` that is free (waiting until one is) and say which GPU it is.

    Of this process's waiters for the same GPUs, the ones with the lowest GPU_PRIORITY try first, and only as
    many as there are GPUs; a GPU freed by this process is tried at once, one freed by another within POLL_S.
    `on_turn` is called once, when fewer than START_AHEAD x len(gpus) of those waiters are ahead of this one, and
    before it first tries: a candidate takes its harness process there, while the GPUs are still busy.
    """
    if not gpus:
        raise ValueError("any_free_gpu needs at least one GPU")
    queue = _queue_of(gpus)
    ticket = queue.join()
    try:
        held = _wait_for_one(gpus, queue, ticket, on_turn)
    finally:
        queue.leave(ticket)
    gpu, fd = held
    try:
        yield gpu
    finally:
        with _CHANGED:
            _HELD.discard(gpu)
            _RELEASED[gpu] = next(_RELEASES)
            os.close(fd)  # closing the only descriptor of the lock's open file releases the lock
            _note_change()


def _wait_for_one(
    gpus: list[str], queue: _Queue, ticket: Ticket, on_turn: Callable[[], None] | None
) -> tuple[str, int]:
    """The GPU taken and the descriptor that holds its lock, once this waiter's turn came and a GPU was free."""
    while True:
        with _CHANGED:
            seen = _changes
        ahead = queue.ahead_of(ticket)
        if on_turn is not None and ahead < START_AHEAD * len(gpus):
            on_turn, turn = None, on_turn
            turn()
        if ahead < len(gpus):
            held = _lock_one(gpus)
            if held is not None:
                return held
        with _CHANGED:
            if _changes == seen:
                _CHANGED.wait(POLL_S)


def _lock_one(gpus: list[str]) -> tuple[str, int] | None:
    """A GPU whose lock could be taken at once, with the descriptor that holds it; None if all are taken. Free GPUs
    are tried in the order this process last let them go (never used first, then in the order given), so that
    candidates spread over the free GPUs instead of all landing on the first one."""
    with _CHANGED:
        order = sorted(gpus, key=lambda gpu: _RELEASED.get(gpu, 0))
    for gpu in order:
        with _CHANGED:
            if gpu in _HELD:
                continue
        fd = _open_lock(lock_path(gpu))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # another process holds it (or a thread of this one, between its lock and _HELD)
            continue
        except BaseException:
            os.close(fd)
            raise
        with _CHANGED:
            _HELD.add(gpu)
        return gpu, fd
    return None


def lock_dir() -> Path:
    """The folder of the lock files, created if missing: world-writable with the sticky bit (as /tmp is), so that
    the runs of every user of the host exclude each other, and none can delete another's lock file."""
    folder = Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "ksci-gpu-locks")
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        return folder
    folder.chmod(0o1777)  # mkdir's mode is cut by the umask
    return folder


def lock_path(gpu: str) -> Path:
    """`<host>-gpu-<id>.lock`: any id works (tests name GPUs "0", "1" on a CPU host); one with characters unsafe in
    a file name gets a digest of the id, so that two such ids never share a lock."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-") or "host"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu)
    if name != gpu or not name:
        name += "-" + hashlib.sha256(gpu.encode()).hexdigest()[:12]
    return lock_dir() / f"{host}-gpu-{name}.lock"


def _open_lock(path: Path) -> int:
    """A new descriptor of the lock file (its own open file, so that a lock on it excludes this process's other
    descriptors too), created if missing, readable by all: flock needs no write access, so another user's
    lock file serves. Not created with O_CREAT over an existing one: Linux's protected_regular refuses that in a
    sticky folder for a file of another user. Closed in child processes at their exec (Python's default): one
    that kept it would keep the lock after this process died."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # another process created it just now: open that one
        os.fchmod(fd, 0o644)  # readable by all, whatever the umask
        return fd
