"""A TEST STAND-IN backend for hosts without a GPU: the REAL compile (screen, sandboxed compiler, library check:
ksci.backends.real.RealBackend.compile) with the SIMULATOR's verify and benchmark (made-up timings).

Under `--simulate` the simulator only screens a source and never runs a compiler, and without a GPU `ksci evolve`
refuses the real backend; so neither path shows what a compile log that goes back to the LLM writer (and into
the lineage, Prefect's results and the report) holds when a kernel source makes the compiler read host files.
With this one in place of `ksci.backends.backend_of` it does: every source a run evaluates is compiled for real by
this host's compiler, in the sandbox (or unconfined, where KSCI_UNSANDBOXED_COMPILE=1 asks for it), and only the
GPU's part is made up. Nothing it returns for a kernel that compiles is a measurement.

    PYTHONPATH=.:tests python -m support.compiling_simulator evolve --simulate --arch sm_90a ...

runs the `ksci` command line with it (tests/test_no_host_file_leaks.py). `--arch` is needed: without a GPU there
is none to ask for its own.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import ksci.backends
from ksci.backends.real import RealBackend
from ksci.backends.simulated import SimulatedBackend
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import CompileResult
from ksci.evaluate.setup import EvaluationSetup
from ksci.problem.spec import Problem


class CompilingSimulator:
    """A Backend (ksci.backends.Backend): the real backend's compile and compiler identity (so the compile tasks'
    cache keys are the real ones), the simulator's runs and identity."""

    def __init__(self, setup: EvaluationSetup) -> None:
        if not setup.arch:
            raise ValueError("the compiling simulator needs --arch (no GPU here to ask for its own)")
        self.arch = setup.arch
        self.real = RealBackend(setup.target)
        self.simulated = SimulatedBackend(setup.simulate or None)

    @property
    def identity(self) -> str:
        return f"compiling-{self.simulated.identity}"

    def compiler_identity(self, arch: str | None) -> str:
        return self.real.compiler_identity(arch or self.arch)

    def compile(self, source: str, options: EvaluationOptions) -> CompileResult:
        return self.real.compile(source, replace(options, arch=options.arch or self.arch))

    def runner(self, problem: Problem, source: str, compiled: CompileResult, options: EvaluationOptions, spares=0):
        return self.simulated.runner(problem, source, compiled, options, spares)

    def baseline_runner(self, problem: Problem, options: EvaluationOptions, spares=0):
        return self.simulated.baseline_runner(problem, options, spares)

    def start_spares(self, problem: Problem, options: EvaluationOptions, count: int) -> None:
        self.simulated.start_spares(problem, options, count)


def compiling_backend_of(setup: EvaluationSetup) -> CompilingSimulator:
    """In place of ksci.backends.backend_of: every run's backend, `--simulate` or not, is the stand-in."""
    return CompilingSimulator(setup)


def main(argv: list[str] | None = None) -> int:
    """`ksci` with the stand-in as every run's backend. The module attribute is replaced before tasks/ is imported
    (the CLI imports the flows lazily, after configuring Prefect), so `from ksci.backends import backend_of` there
    binds the stand-in."""
    bound = [name for name in sys.modules if name.startswith("tasks.")]
    assert not bound, f"{bound} bound the real backend_of before the stand-in was put in"
    ksci.backends.backend_of = compiling_backend_of
    from ksci.cli import main as ksci_main

    return ksci_main(argv)


if __name__ == "__main__":
    sys.exit(main())
