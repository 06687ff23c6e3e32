"""What every evaluation of a run shares: the problem, where it runs and on what backend.

A frozen value of plain fields, so that it travels as a Prefect task parameter (and into its cache key) and
through a deployment's JSON parameters. The backend (real toolchains and GPUs, or the simulator) is chosen once,
from `simulate`, by `ksci.backends.backend_of`; nothing downstream branches on `simulate` again.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EvaluationSetup:
    problem: str
    target: str
    store_root: str
    arch: str | None = None
    gpus: tuple[str, ...] = field(default=("0",))
    # None: the real backend. "": the simulator with made-up timings. A path: the simulator replaying a recording.
    simulate: str | None = None
