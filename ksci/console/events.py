"""The events of a running evolution, for whoever shows its progress (ksci.console.display).

The evolve flow reports what happens (a generation starts, a candidate is recorded, a generation ends, the run
stops early) to the observer installed in this process. Flow parameters cannot carry a callback (a deployment's
parameters are JSON), so the observer is a process-wide one: `ksci evolve` installs its display before it runs the
flow; a flow run that a worker or `prefect deployment run` starts has none and reports to a RunObserver, which does
nothing (its progress is in its logs and artifacts, as before).
"""

from __future__ import annotations

import threading


class RunObserver:
    """The events, each doing nothing here; a display overrides those it shows. Called from the flow's thread and,
    for candidates, from the task threads that record them: an observer must be thread-safe and must not raise."""

    def generation_started(self, generation: int, children: int) -> None:
        """A generation starts with this many children to evaluate."""

    def candidate_finished(self, generation: int, row: dict | None) -> None:
        """A candidate of the generation was recorded (its lineage row), or its chain failed (None)."""

    def generation_finished(self, summary: dict) -> None:
        """A generation ended: the flow's summary of it (its rows under "rows")."""

    def stopped_early(self, message: str) -> None:
        """The run stops before its last generation (a limit or a budget), for this reason."""


_observer: RunObserver = RunObserver()
_lock = threading.Lock()


def observer() -> RunObserver:
    """The observer of this process's evolution (a RunObserver that does nothing when none was installed)."""
    with _lock:
        return _observer


def install(new: RunObserver | None) -> None:
    """Make `new` this process's observer (None: none again)."""
    global _observer
    with _lock:
        _observer = new or RunObserver()
