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
import time
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
# (tasks.evaluation._spares).
START_AHEAD = 2
EXIT_LOCK = "exit"  # the second lock file of a GPU, held by runs whose process is still exiting (Lease)
EXIT_POLL_S = 0.005  # how often a run that waits for earlier exits looks again

# The lease the current thread holds (inside any_free_gpu), for the harness run made under it.
_LEASE: ContextVar[Lease | None] = ContextVar("ksci_gpu_lease", default=None)

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
    lease = Lease(*held)
    token = _LEASE.set(lease)
    try:
        yield lease.gpu
    finally:
        _LEASE.reset(token)
        lease.close()


class Lease:
    """The GPU a thread holds (any_free_gpu), which its harness run may give up before its process has exited.

    A harness process's exit (the driver tearing its GPU context down: about 0.2 s on an H100, issue 28) is not
    the candidate's work. `hand_over` lets the next candidate take the GPU at the run's result, so that the next
    harness starts its context while this one exits; the exiting run holds the GPU's exit lock (shared) until its
    process is gone (`exited`, or `close`). A run that times anything first waits for every earlier run on its GPU
    to have exited (`wait_for_exits`: the exit lock, exclusive), so that no timed call overlaps another process's
    exit. Both locks are flock locks on files of lock_dir(): every ksci process of the host takes part, and a dead
    holder's locks go with it."""

    def __init__(self, gpu: str, fd: int) -> None:
        self.gpu = gpu
        self._fd: int | None = fd  # the GPU's lock, held until handed over or closed
        self._exit_fd: int | None = None  # the exit lock, held shared from the hand-over until the exit

    @property
    def handed_over(self) -> bool:
        return self._fd is None

    def hand_over(self) -> None:
        """Let the next candidate have the GPU now, while this run's process may still be exiting."""
        if self._fd is None:
            return
        self._exit_fd = _open_lock(lock_path(self.gpu, EXIT_LOCK))
        fcntl.flock(self._exit_fd, fcntl.LOCK_SH)  # held exclusively only by a wait_for_exits, for an instant
        self._release()

    def wait_for_exits(self, deadline: float) -> bool:
        """Block until no earlier run on this GPU is still exiting, or until `deadline` (time.monotonic());
        whether they all had. Each waits at most its exit grace (ksci.evaluate.run.isolate.EXIT_GRACE_S)."""
        fd = _open_lock(lock_path(self.gpu, EXIT_LOCK))
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(EXIT_POLL_S)
        finally:
            os.close(fd)  # an exclusive lock taken only to know that nobody held it: let go at once

    def exited(self) -> None:
        """The run's process is gone: runs after it may time now."""
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None

    def close(self) -> None:
        """The run is over (or never ran): give up whatever of the GPU this lease still holds."""
        if self._fd is not None:
            self._release()
        self.exited()

    def _release(self) -> None:
        with _CHANGED:
            _HELD.discard(self.gpu)
            _RELEASED[self.gpu] = next(_RELEASES)
            os.close(self._fd)  # closing the only descriptor of the lock's open file releases the lock
            self._fd = None
            _note_change()


def current_lease(gpu: str | None) -> Lease | None:
    """The lease this thread holds on `gpu` (inside any_free_gpu), if any: a harness run on it hands it over at
    its result and waits for earlier exits before timing (ksci.evaluate.run.isolate.Child.run)."""
    lease = _LEASE.get()
    return lease if lease is not None and gpu is not None and lease.gpu == gpu else None


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


def lock_path(gpu: str, kind: str = "") -> Path:
    """`<host>-gpu-<id>.lock` (`<host>-gpu-<id>.<kind>.lock`: the GPU's other locks, Lease): any id works (tests
    name GPUs "0", "1" on a CPU host); one with characters unsafe in a file name gets a digest of the id, so that two
    such ids never share a lock."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-") or "host"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu)
    if name != gpu or not name:
        name += "-" + hashlib.sha256(gpu.encode()).hexdigest()[:12]
    return lock_dir() / f"{host}-gpu-{name}{'.' + kind if kind else ''}.lock"


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
