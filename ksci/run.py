"""One evolution's settings (RunSpec) and how far it may go (RunLimits): the object the command line builds, the
evolve flow runs, and each generation (a subflow, or a flow run of the `evolve-generation/generation` deployment,
which receives it as a JSON parameter) works from.

RunLimits is Kernel Tuner's `max_fevals` and `time_limit`, for a run measured in candidates and GPU time rather
than in generations. Both are checked before a generation starts, so that a run stops cleanly between generations
(every candidate it started is timed and recorded) and can be continued with `ksci evolve --run RUN`; the candidate
cap is exact: the generation that reaches it is given only the candidates left. Generation 0 always runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ksci import PROJECT_ROOT
from ksci.evaluate.setup import EvaluationSetup
from ksci.lineage.parts import check_run
from ksci.lineage.store import LineageStore
from ksci.problem.spec import TARGETS
from ksci.proposers.registry import kind_of

if TYPE_CHECKING:
    from ksci.lineage.identity import RunIdentity

DEFAULT_STORE = str(PROJECT_ROOT / "data" / "runs")
OVERLAP_RULE = (
    "0 or more, and 0 with the llm proposer (an LLM generation learns from the results and findings of the one "
    "just before it)"
)
LIMIT_PARAMETERS = ("max_candidates", "time_limit_s")  # RunLimits' fields, flat among a deployment's parameters
MAX_RUN_NAME = 100  # a folder name of the store, with room for its files' names under most file systems' 255
MAX_SEED = 2**32 - 1  # numpy's and Optuna's samplers take seeds in [0, 2**32)


@dataclass(frozen=True)
class RunLimits:
    max_candidates: int | None = None  # candidates in the run, those of earlier invocations included
    time_limit_s: float | None = None  # no generation starts after this much wall time of this invocation

    def __post_init__(self) -> None:
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ValueError(f"max_candidates {self.max_candidates}: expected at least 1")
        if self.time_limit_s is not None and not _finite_at_least(self.time_limit_s, 0):
            raise ValueError(f"time_limit_s {self.time_limit_s}: expected a finite number, at least 0")

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


def overlap_allowed(overlap: int, proposer: str) -> bool:
    """Whether an evolve run may use this overlap (OVERLAP_RULE says the rule to the user)."""
    return overlap >= 0 and not (overlap and kind_of(proposer).uses_llm)


@dataclass(frozen=True)
class RunSpec:
    """Everything an evolution is run with, checked once here. Plain fields, so that it travels as a Prefect flow
    parameter and through a deployment's JSON parameters; the LLM configuration object (which may hold a key)
    is not among them: `llm_config` names the file a worker reads instead (ksci.llm.config.configured_llm)."""

    problem: str
    run: str
    target: str = "cuda"
    generations: int = 5
    children: int = 6  # candidates per generation
    strategy: str = "elitist"  # parent selection (ksci.proposers.select)
    seed: int = 0
    store_root: str = DEFAULT_STORE
    arch: str | None = None
    gpus: tuple[str, ...] = ("0",)
    # None: real GPUs. "": the simulator with made-up timings. A path: the simulator replaying a recording.
    simulate: str | None = None
    proposer: str = "tuning"  # a name of ksci.proposers.registry: "tuning" (Optuna), "llm" (the LLM scientist), ...
    llm_config: str | None = None  # a ksci.toml path, for a process given no LlmConfig object (a deployment's)
    overlap: int = 0  # generations a new one may overlap (ksci.proposers.overlap)
    generation_deployment: str | None = None  # run each generation as a flow run of this deployment
    profile: bool = True  # profile each generation's Base for the LLM's prompts (ksci.profile; --no-profile: off)
    # Stop timing a shape once a candidate is known to lose it to the run's best (ksci.evaluate.harness.timing
    # raced_out): fewer calls on losing shapes, the same rigour per call. On by default since measured (issue 28:
    # with per-generation baselines and overlap 1, a tuning evolution went from about 560 to about 1000 an hour).
    race: bool = True
    limits: RunLimits = field(default_factory=RunLimits)

    def __post_init__(self) -> None:
        kind_of(self.proposer)  # a ValueError naming the registered proposers
        if not overlap_allowed(self.overlap, self.proposer):
            raise ValueError(f"overlap {self.overlap}: expected {OVERLAP_RULE}")
        if self.target not in TARGETS:
            raise ValueError(f"target {self.target!r}: expected {' or '.join(TARGETS)}")
        wrong = (
            run_name_problem(self.run)
            or strategy_problem(self.strategy)
            or counts_problem(self.generations, self.children, self.seed)
        )
        if wrong:
            raise ValueError(wrong)
        object.__setattr__(self, "gpus", tuple(self.gpus))  # a list from JSON parameters, or from a caller

    def evaluation(self) -> EvaluationSetup:
        """What every candidate of this run is evaluated with (the backend is chosen from it once)."""
        return EvaluationSetup(self.problem, self.target, self.store_root, self.arch, self.gpus, self.simulate)

    @property
    def on_workers(self) -> bool:
        """Whether each generation is a flow run of the generation deployment (not with overlap: those generations
        hand proposals to each other in one process)."""
        return self.generation_deployment is not None and not self.overlap

    def identity(self) -> RunIdentity:
        """What makes this run this run (problem, target, settings, template hashes): ksci.lineage.identity."""
        from ksci.lineage.identity import identity_of
        from ksci.problem.spec import load_problem

        return identity_of(
            load_problem(self.problem), self.target, self.arch, self.proposer, self.strategy, self.simulate
        )

    def with_children(self, children: int) -> RunSpec:
        return replace(self, children=children)

    @classmethod
    def from_parameters(cls, parameters: dict) -> RunSpec:
        """From the evolve flow's flat parameters (a deployment's, `-p generations=3`): RunLimits' fields among
        them, a run name made up when none is given, every GPU index as a string."""
        values = {k: v for k, v in parameters.items() if k not in LIMIT_PARAMETERS}
        values["run"] = values.get("run") or new_run_name(values["problem"], values.get("target", "cuda"))
        values["gpus"] = tuple(str(g) for g in values.get("gpus") or ("0",))
        limits = RunLimits(**{k: parameters.get(k) for k in LIMIT_PARAMETERS})
        return cls(**values, limits=limits)

    def parameters(self) -> dict:
        """The evolve flow's flat parameters for this spec (from_parameters' inverse)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "limits"}
        limits = {name: getattr(self.limits, name) for name in LIMIT_PARAMETERS}
        return {**values, "gpus": list(self.gpus), **limits}


# The checks of an evolve command's settings, each the reason in one line or None, in the command line's words (a
# deployment's parameters have the same names): called by RunSpec (so that a deployment's parameters are checked
# too) and by the command line before Prefect starts (ksci.cli._check_evolve), where they used to fail late (a bad
# strategy in the first generation) or never (a run named ../escape, a time limit of nan).


def run_name_problem(run: str | None) -> str | None:
    """A run names a folder of the store: no path, no hidden or reserved folder, not empty."""
    try:
        check_run(run or "")
    except ValueError as exc:
        return str(exc)
    if len(run) > MAX_RUN_NAME:
        return f"invalid run name {run[:20]!r}...: at most {MAX_RUN_NAME} characters"
    return None


def strategy_problem(strategy: str) -> str | None:
    from ksci.proposers.select import STRATEGIES

    if strategy in STRATEGIES:
        return None
    return f"--strategy must be one of {', '.join(sorted(STRATEGIES))} (got {strategy!r})"


def counts_problem(generations: int, children: int, seed: int) -> str | None:
    if generations < 1 or children < 1:
        return f"--generations and --children must be at least 1 (got {generations} and {children})"
    if not 0 <= seed <= MAX_SEED:
        return f"--seed must be 0 to {MAX_SEED} (got {seed})"
    return None


def limits_problem(max_candidates: int | None, time_limit_min: float | None) -> str | None:
    """The command line's limits: a candidate count and minutes (nan, inf and negative refused)."""
    if max_candidates is not None and max_candidates < 1:
        return f"--max-candidates must be at least 1 (got {max_candidates})"
    if time_limit_min is not None and not _finite_at_least(time_limit_min, 0):
        return f"--time-limit must be at least 0 minutes, a finite number (got {time_limit_min})"
    return None


def budget_problem(tokens: int | None, usd: float | None) -> str | None:
    """An LLM budget that could never be spent sensibly: 0 or fewer tokens, a negative, NaN or infinite amount."""
    if tokens is not None and tokens < 1:
        return f"--budget-tokens must be at least 1 (got {tokens})"
    if usd is not None and not (_finite_at_least(usd, 0) and usd > 0):
        return f"--budget-usd must be a finite amount above 0 dollars (got {usd})"
    return None


def output_file_problem(path: Path) -> str | None:
    """Why `path` cannot be written (no such folder, a folder itself, not writable), checked before the work that
    produces its content; None when it can be."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"{path} is a folder; give a file name"
    if not folder.is_dir():
        return f"cannot write {path}: no folder {folder}"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"cannot write {path}: permission denied"
    return None


def _finite_at_least(value: float, low: float) -> bool:
    return math.isfinite(value) and value >= low


def new_run_name(problem: str, target: str) -> str:
    return f"{problem}-{target}-{datetime.now(UTC):%Y%m%d-%H%M%S}"


def candidates_before(spec: RunSpec, generation: int, running: dict[int, int] | None = None) -> int:
    """What counts against the candidate cap before `generation` starts: the candidates recorded in the generations
    before it, those still `running` counted by the children given to them instead (0 when there is no cap: the
    lineage is not read). Counted by generation, so that a rerun that replays later generations from the cache
    counts as the first run did."""
    if not spec.limits.max_candidates:
        return 0
    running = running or {}
    rows = LineageStore(spec.store_root).read(spec.run)
    recorded = (rows["generation"] < generation) & ~rows["generation"].isin(list(running))
    return int(recorded.sum()) + sum(running.values())


def progress_line(summaries: list[dict], generations: int, width: int = 30) -> str:
    """A text progress bar with the best geomean so far, printed after each generation."""
    done = len(summaries)
    bar = "#" * round(width * done / generations) + "-" * (width - round(width * done / generations))
    times = [r["geomean_us"] for s in summaries for r in s["rows"] if r["status"] == "ok" and r.get("geomean_us")]
    best = f"best so far {min(times):.2f} us" if times else "nothing has passed yet"
    return f"[{bar}] generation {done}/{generations}: {best}"
