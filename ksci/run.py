"""One evolution's settings (RunSpec) and how far it may go (RunLimits): the object the command line builds, the
evolve flow runs, and each generation (a subflow, or a flow run of the `evolve-generation/generation` deployment,
which receives it as a JSON parameter) works from.

RunLimits is Kernel Tuner's `max_fevals` and `time_limit`, for a run measured in candidates and GPU time rather
than in generations. Both are checked before a generation starts, so that a run stops cleanly between generations
(every candidate it started is timed and recorded) and can be continued with `ksci evolve --run RUN`; the candidate
cap is exact: the generation that reaches it is given only the candidates left. Generation 0 always runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime

from ksci import PROJECT_ROOT
from ksci.evaluate.setup import EvaluationSetup
from ksci.lineage.store import LineageStore

DEFAULT_STORE = str(PROJECT_ROOT / "data" / "runs")
PROPOSERS = ("tuning", "llm")
OVERLAP_RULE = (
    "0 or more, and 0 with the llm proposer (an LLM generation learns from the results and findings of the one "
    "just before it)"
)
LIMIT_PARAMETERS = ("max_candidates", "time_limit_s")  # RunLimits' fields, flat among a deployment's parameters


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


def overlap_allowed(overlap: int, proposer: str) -> bool:
    """Whether an evolve run may use this overlap (OVERLAP_RULE says the rule to the user)."""
    return overlap >= 0 and not (overlap and proposer == "llm")


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
    proposer: str = "tuning"  # "tuning" (Optuna over the seed templates) or "llm" (the LLM scientist)
    llm_config: str | None = None  # a ksci.toml path, for a process given no LlmConfig object (a deployment's)
    overlap: int = 0  # generations a new one may overlap (ksci.proposers.overlap)
    generation_deployment: str | None = None  # run each generation as a flow run of this deployment
    limits: RunLimits = field(default_factory=RunLimits)

    def __post_init__(self) -> None:
        if self.proposer not in PROPOSERS:
            raise ValueError(f"proposer {self.proposer!r}: expected 'tuning' or 'llm'")
        if not overlap_allowed(self.overlap, self.proposer):
            raise ValueError(f"overlap {self.overlap}: expected {OVERLAP_RULE}")
        object.__setattr__(self, "gpus", tuple(self.gpus))  # a list from JSON parameters, or from a caller

    def evaluation(self) -> EvaluationSetup:
        """What every candidate of this run is evaluated with (the backend is chosen from it once)."""
        return EvaluationSetup(self.problem, self.target, self.store_root, self.arch, self.gpus, self.simulate)

    @property
    def on_workers(self) -> bool:
        """Whether each generation is a flow run of the generation deployment (not with overlap: those generations
        hand proposals to each other in one process)."""
        return self.generation_deployment is not None and not self.overlap

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
