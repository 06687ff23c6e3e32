"""How far an evolution may go: at most so many candidates, or no new generation after so much wall time.

Kernel Tuner's `max_fevals` and `time_limit`, for a run measured in candidates and GPU time rather than in
generations. Both are checked before a generation starts, so that a run stops cleanly between generations (every
candidate it started is timed and recorded) and can be continued with `ksci evolve --run RUN`; the candidate cap is
exact: the generation that reaches it is given only the candidates left. Generation 0 always runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunLimits:
    max_candidates: int | None = None  # candidates in the run, those of earlier invocations included
    time_limit_s: float | None = None  # no generation starts after this much wall time of this invocation

    def __post_init__(self) -> None:
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ValueError(f"max_candidates {self.max_candidates}: expected at least 1")
        if self.time_limit_s is not None and self.time_limit_s < 0:
            raise ValueError(f"time_limit_s {self.time_limit_s}: expected at least 0")

    def children(self, wanted: int, candidates: int) -> int:
        """How many children the next generation may have when the run holds (or has in flight) `candidates`."""
        if self.max_candidates is None:
            return wanted
        return max(0, min(wanted, self.max_candidates - candidates))

    def stop_reason(self, generation: int, candidates: int, elapsed_s: float) -> str | None:
        """Why generation `generation` must not start, or None. `candidates`: recorded or in flight."""
        if generation == 0:
            return None
        if self.max_candidates is not None and candidates >= self.max_candidates:
            return f"the run holds {candidates} candidates (limit {self.max_candidates})"
        if self.time_limit_s is not None and elapsed_s >= self.time_limit_s:
            return f"{elapsed_s / 60:.1f} min have passed (time limit {self.time_limit_s / 60:.1f} min)"
        return None
