"""The real backend: this host's toolchains (ksci/evaluate/toolchain/toolchains.py) and its GPUs, through the isolated
harness process (ksci/evaluate/run/harness_process.py).

Compile is screen, compiler and library check (ksci.evaluate.host_stages.compile_candidate); a run is a harness child
started ahead (a spare, where there is one) and handed its GPU and library once its GPU is free
(ksci.evaluate.host_stages.run_phases).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import replace

from ksci.evaluate.host_stages import compile_candidate, measure_baselines, run_phases
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import CompileResult, Verdict
from ksci.evaluate.run.harness_process import SPARES, Harness, harness_request
from ksci.evaluate.run.visibility import gpu_visible
from ksci.evaluate.toolchain.toolchains import ToolchainMissing, default_arch, find_toolchain
from ksci.problem.spec import Problem


class RealBackend:
    def __init__(self, target: str) -> None:
        self.target = target

    @property
    def identity(self) -> str:
        return host_gpus(self.target)

    def compiler_identity(self, arch: str | None) -> str:
        return toolchain_identity(self.target, arch)

    def compile(self, source: str, options: EvaluationOptions) -> CompileResult:
        return compile_candidate(source, options)

    def runner(
        self, problem: Problem, source: str, compiled: CompileResult, options: EvaluationOptions, spares: int = 0
    ) -> HarnessRun:
        return HarnessRun(problem, compiled, options, spares)

    def baseline_runner(self, problem: Problem, options: EvaluationOptions, spares: int = 0) -> HarnessRun:
        return HarnessRun(problem, None, options, spares)

    def start_spares(self, problem: Problem, options: EvaluationOptions, count: int) -> None:
        if gpu_visible(self.target):  # without a GPU the GPU tasks will say so
            SPARES.fill(harness_request(problem, options), count)


class HarnessRun:
    """A run of a compiled kernel in its harness child (ksci.evaluate.run.harness_process.Harness); without one
    (`compiled` None), of the baselines alone (the reference and the vendor library, ksci.evaluate.host_stages.
    measure_baselines). A child started with any request of the problem times the baselines when it is given no
    library, so the baselines take a spare started for the benchmark."""

    def __init__(
        self, problem: Problem, compiled: CompileResult | None, options: EvaluationOptions, spares: int
    ) -> None:
        self.problem, self.compiled, self.options = problem, compiled, options
        self.harness = Harness(problem, compiled.library if compiled else None, options, spares=spares)

    def start(self) -> None:
        self.harness.start()

    def run(self, device: str | None) -> Verdict:
        options = replace(self.options, device=device)
        if self.compiled is None:
            return measure_baselines(self.problem, options, self.harness)
        return run_phases(self.problem, self.compiled, options, self.harness)

    def __enter__(self) -> HarnessRun:
        return self

    def __exit__(self, *exc) -> None:
        self.harness.close()


@functools.cache
def host_gpus(target: str) -> str:
    """Every visible GPU's model and driver, sorted and deduplicated (a candidate takes any of them); "none"
    without a GPU. Asked once per process."""
    if target == "rocm":
        argv = ["rocm-smi", "--showproductname", "--showdriverversion", "--csv"]
    else:
        argv = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    if shutil.which(argv[0]) is None:
        return "none"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "none"
    return "; ".join(sorted({line.strip() for line in out.splitlines() if line.strip()})) or "none"


def toolchain_identity(target: str, arch: str | None) -> str:
    """The compiler's version and whole command line (the toolchain's own flags included)."""
    try:
        toolchain = find_toolchain(target)
    except ToolchainMissing:
        return "missing"  # the compile fails (not cached by Prefect); a later compiler gets a new key
    return "\0".join([toolchain.version, *toolchain.command("kernel", "kernel.so", arch or _default_arch(target))])


@functools.cache
def _default_arch(target: str) -> str:
    return default_arch(target)  # the GPU's own (asks nvidia-smi or rocminfo): once per process
