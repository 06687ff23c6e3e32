"""A time limit for the importer's real runs (SIGALRM, main thread only) that nests: an inner limit never
cancels an outer one (a corpus run's per-file limit, one import's budget, one shape's share of it)."""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager


@contextmanager
def time_limit(seconds: float | None, expired: type[BaseException]):
    """Raise `expired` (a BaseException, so a reference's own `except Exception` lets it pass) after `seconds`;
    where an outer limit ends first, the outer one's exception is raised there instead. None, or a thread other
    than the main one: no limit."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    started = time.monotonic()
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    previous = signal.getsignal(signal.SIGALRM)

    def alarm(signum, frame):
        if outer and time.monotonic() - started >= outer - 1e-3 and callable(previous):
            previous(signum, frame)  # the outer limit's moment: its handler raises its own exception
        raise expired

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, max(min(seconds, outer) if outer else seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))
