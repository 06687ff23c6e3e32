"""What compiles and runs a candidate: this host's toolchains and GPUs (real.py), or the simulator (simulated.py).

A Backend is chosen once, from a run's EvaluationSetup (`backend_of`, the one place that looks at `simulate`), and
the stage ordering (ksci/evaluate/stage_order.py) calls it without knowing which it is. Its `identity` names what
decides a verdict beyond the code and the inputs (the host's GPU models and drivers, or the simulator's
recording) and `compiler_identity` what decides a compile (the toolchain's version and command line): both go
into the tasks' cache keys (tasks/cache_keys.py), the GPU ids do not.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from ksci.backends.real import RealBackend
from ksci.backends.simulated import SimulatedBackend
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import CompileResult, Verdict
from ksci.evaluate.setup import EvaluationSetup
from ksci.problem.spec import Problem


class KernelRun(AbstractContextManager, Protocol):
    """One run of a compiled kernel's phases, which can be started before its GPU is known; leaving the `with`
    block ends it, run or not."""

    def start(self) -> None:
        """Get ready now (the real one starts its harness process), while the GPU is still busy."""

    def run(self, device: str | None) -> Verdict:
        """Run the phases on GPU `device` (an index among this process's GPUs; None: any it may see)."""


class Backend(Protocol):
    @property
    def identity(self) -> str:
        """What runs the kernels, for cache keys: the host's GPU models and drivers, or the simulator's recording."""

    def compiler_identity(self, arch: str | None) -> str:
        """What compiles them, for cache keys: the toolchain's version and whole command line."""

    def compile(self, source: str, options: EvaluationOptions) -> CompileResult:
        """A prepared source's library, or why there is none (a value, never an exception for the candidate)."""

    def runner(
        self, problem: Problem, source: str, compiled: CompileResult, options: EvaluationOptions, spares: int = 0
    ) -> KernelRun:
        """A run of `options.phases` of a compiled kernel; `spares`: harness processes to keep starting ahead."""

    def baseline_runner(self, problem: Problem, options: EvaluationOptions, spares: int = 0) -> KernelRun:
        """A run that times the baselines alone (the reference and the vendor library), no candidate: its verdict's
        timings have no kernel time. A run's candidates' GPU steps take them from it (ksci.evaluate.stage_order.
        with_baselines) instead of timing them beside every candidate."""

    def start_spares(self, problem: Problem, options: EvaluationOptions, count: int) -> None:
        """Have `count` runs of these options ready before the first candidate asks (a run's start)."""


def backend_of(setup: EvaluationSetup) -> Backend:
    """The backend a run's evaluations use: the simulator where `simulate` is set ("" for made-up timings, a path
    to replay a recording), else the real toolchains and GPUs of this host."""
    if setup.simulate is not None:
        return SimulatedBackend(setup.simulate or None)
    return RealBackend(setup.target)
