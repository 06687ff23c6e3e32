"""What one evaluation is run with (EvaluationOptions), and the one failure that is never the candidate's
(EnvironmentProblem).

The options are the command line's knobs (`ksci evaluate`); a run's GPU tasks derive theirs from its
EvaluationSetup (`compile_options`, `run_options`), so that the spare harnesses started at a run's start and the
ones its candidates take are started with the same request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ksci import PROJECT_ROOT
from ksci.evaluate.setup import EvaluationSetup
from ksci.problem.contract import DEFAULT_COUNT

DEFAULT_CACHE_DIR = Path(os.environ.get("KSCI_COMPILE_CACHE", PROJECT_ROOT / "data" / "cache" / "compile"))


class EnvironmentProblem(RuntimeError):
    """Not the candidate's fault: no GPU, or a harness that cannot start. Retry elsewhere or later."""


@dataclass(frozen=True)
class EvaluationOptions:
    target: str = "cuda"
    arch: str | None = None
    compile_only: bool = False
    phases: tuple[str, ...] = ("verify", "benchmark")
    time_baselines: bool = True
    timeout_s: float = 900.0
    cache_dir: Path = DEFAULT_CACHE_DIR
    policy: dict = field(default_factory=dict)  # overrides of ksci.evaluate.harness.timing.TimingPolicy
    device: str | None = None  # run on this GPU only (index among the GPUs this process may use)
    tests: tuple[dict, ...] | None = None  # subsets of the problem's shapes, e.g. for quick checks
    benchmarks: tuple[dict, ...] | None = None
    # (shape key, the run's best median in us) to race against (ksci evolve --race): a shape's timed calls stop once
    # the candidate is known to lose it (ksci.evaluate.harness.timing.raced_out). Sent with the go-ahead, not with
    # the request a spare harness starts with, since it changes as the run's best does.
    race: tuple[tuple[str, float], ...] = ()
    # In-contract shapes, not listed, drawn per evaluation and verified besides the tests (ksci/problem/contract.py);
    # 0: none. Drawn at the run, sent with the go-ahead.
    held_out: int = DEFAULT_COUNT


def compile_options(setup: EvaluationSetup) -> EvaluationOptions:
    """The options a run's compile step uses: its target and arch, the default compile cache."""
    return EvaluationOptions(target=setup.target, arch=setup.arch)


def run_options(
    setup: EvaluationSetup,
    phases: tuple[str, ...],
    race: tuple[tuple[str, float], ...] = (),
    time_baselines: bool = True,
) -> EvaluationOptions:
    """The options of a run's GPU step (a candidate's verify and benchmark, tasks.evaluation.CANDIDATE_PHASES, or
    the baselines alone): the arch is the compiled library's, so not here. `time_baselines` False: a benchmark that
    leaves the reference and the vendor library to the run's baseline step (tasks/evaluation.py)."""
    return EvaluationOptions(target=setup.target, phases=phases, race=race, time_baselines=time_baselines)
