"""Signals that stop `ksci evolve` in order: Ctrl-C from a terminal, SIGINT, SIGTERM.

The first signal stops the run: every harness child's process group is killed at once and no new one starts
(ksci.evaluate.run.isolate.stop_children: an interrupted kernel is never recorded as a verdict), and `Interrupted` is
raised in the main thread, where the flow runs: Prefect marks the flow run crashed (the embedded API, in a process
group of its own, is still there to hear it), the CLI prints one line naming the run and how to continue it, and
the API is stopped last. Exit codes: 130 for SIGINT, 143 for SIGTERM (128 + the signal, as a shell reports them).

A second signal, or a stop that takes longer than `grace_s`, ends the process at once: the line is printed if it
was not yet, the API's and the children's process groups are killed, and the process exits with the same code.
During a flow run Prefect's own SIGTERM handler runs first (it marks the flow run crashed) and then hands the
signal on to this one (prefect.utilities.engine.capture_sigterm).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

from ksci.evaluate.run.isolate import stop_children

STOP_GRACE_S = 8.0  # after the first signal, the process ends by itself within this; then at once


class Interrupted(KeyboardInterrupt):
    """The run was stopped from outside: by a signal (`signum`), or because its reader closed stdout."""

    def __init__(self, why: str, exit_code: int) -> None:
        super().__init__(why)
        self.why, self.exit_code = why, exit_code


def say_stopped(run: str, why: str) -> None:
    """The one line of a stopped run, on stderr: what stopped it and how to continue it."""
    print(
        f"ksci: evolution {run} {why}; every candidate recorded so far is kept: continue it with --run {run}",
        file=sys.stderr,
        flush=True,
    )


def signal_exit_code(signum: int) -> int:
    return 128 + signum


class StopOnSignals:
    """Within its block, SIGINT and SIGTERM stop the run as the module says. `announce(why)` prints the one line;
    `kill_all()` kills what must not outlive the process (the embedded API's process group)."""

    def __init__(self, announce: Callable[[str], None], kill_all: Callable[[], None], grace_s: float = STOP_GRACE_S):
        self.announce, self.kill_all, self.grace_s = announce, kill_all, grace_s
        self.first: Interrupted | None = None
        self._announced = threading.Lock()
        self._said = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopOnSignals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        if self.first is not None:
            return  # stopping: a second signal, while the interpreter ends its threads, must still end it at once
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def say_once(self, why: str) -> None:
        """The one line, whichever path gets there first (the CLI, a second signal, the grace timer)."""
        with self._announced:
            if self._said:
                return
            self._said = True
        self.announce(why)

    def stop(self, interrupted: Interrupted) -> None:
        """Stop the run (the first signal, or a closed stdout): children killed now, the process ended within
        grace_s whatever happens, and `interrupted` raised in the calling (main) thread."""
        self.first = interrupted
        stop_children()
        timer = threading.Timer(self.grace_s, self._exit_now)
        timer.daemon = True  # never what keeps the process alive
        timer.start()
        raise interrupted

    def _on_signal(self, signum: int, frame) -> None:
        if self.first is not None:  # the second: at once
            self._exit_now()
        name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name
        self.stop(Interrupted(f"stopped by {name}", signal_exit_code(signum)))

    def _exit_now(self) -> None:
        first = self.first or Interrupted("stopped", signal_exit_code(signal.SIGINT))
        self.say_once(first.why)
        stop_children()
        self.kill_all()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(first.exit_code)
