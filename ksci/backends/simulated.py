"""A GPU SIMULATOR for tests and demos on machines without a GPU (Kernel Tuner's simulation idea).

It replays timings recorded on a real GPU (a JSON list written by benchmarks/record_space.py, or exported from a
lineage) for the (template, parameters) point named in a rendered kernel's provenance line. Points that were not
recorded get a deterministic made-up time (a template point's from a cost model over its parameters and the shape,
ksci/backends/cost_model.py, so that a simulated tuning run has something to learn); every verdict it returns says
in its fingerprint and message that it was simulated. Nothing it returns is a measurement.
A composed source (ksci.problem.compose) is timed per shape as the variant it dispatches that shape to would be alone.
Made-up times vary from shape to shape as well as from point to point, so that per-shape tuning has something
to find. A source may carry a simulator directive line, `// ksci-simulate: compile_error` (or wrong, runtime_error, ...),
to be simulated as failing that way: tests of the LLM writer's repair path use it. `// ksci-simulate: shape_table`
stands for a kernel right on the listed shapes only: its verification fails on the first held-out shape drawn
(ksci/problem/contract.py), as the real harness would report it; every other simulated kernel is right on them.
KSCI_SIMULATE_HOLD_S (seconds, default 0) makes each simulated run keep its GPU slot that long, as a real harness
does for seconds: tests that must catch a candidate holding a slot (tests/test_faults.py) set it.
SimulatedBackend is the simulator as a Backend (ksci/backends/__init__.py), the one a run with `simulate` gets; its
compile screens the source as the real one does (ksci.evaluate.host_stages.screen_refusal).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter, ValidationError

from ksci.backends.cost_model import point_time_us, unit
from ksci.evaluate.host_stages import screen_refusal
from ksci.evaluate.options import EnvironmentProblem, EvaluationOptions
from ksci.evaluate.results import CompileResult, ShapeTiming, Status, Timing, Verdict, geomean
from ksci.evaluate.toolchain.compile import source_hash
from ksci.lineage.store import shape_times
from ksci.problem.compose import composed_plan
from ksci.problem.contract import draw_held_out
from ksci.problem.render import render_kernel
from ksci.problem.spec import Problem, ProblemError, shape_key

_PROVENANCE = re.compile(r"^// ksci: rendered from (\w+)/(\w+) with (.*)$", re.M)
_DIRECTIVE = re.compile(r"^// ksci-simulate: (\w+)[ \t]*$", re.M)
SIMULATED_GPU = "SIMULATOR"
SIMULATOR_TOOLCHAIN = "simulator"  # the toolchain a simulated compile reports, on failed rows too


def directive(source: str) -> str | None:
    """The status a `// ksci-simulate: STATUS` line asks for, or None."""
    match = _DIRECTIVE.search(source)
    return match.group(1) if match else None


def provenance(source: str) -> tuple[str, dict] | None:
    """(template, params) from the first line that ksci.problem.render writes, or None for a hand-written source."""
    match = _PROVENANCE.search(source)
    if not match:
        return None
    params = {}
    for item in match.group(3).split():
        name, _, value = item.partition("=")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    return match.group(2), params


class RecordingError(ValueError):
    """A recording that cannot be replayed: one line naming the file and what is wrong with it."""


class RecordedPoint(BaseModel):
    """One entry of a recording (recording_from_lineage writes them); other keys are kept and ignored."""

    model_config = ConfigDict(extra="allow")
    template: str
    params: dict[str, StrictInt | float | str]
    status: Status | Literal["environment_error"]  # the latter stands for a GPU that went away mid-run
    shape_times: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None
    reference_geomean_us: float | None = None
    vendor_geomean_us: float | None = None


_POINTS = TypeAdapter(list[RecordedPoint])


def load_recording(path: str | Path, problem: Problem | None = None) -> list[dict]:
    """A recording's rows, checked: a JSON list of RecordedPoint, whose ok rows time every benchmark shape of
    `problem` when one is given. Bad JSON or a wrong structure is one RecordingError, not a traceback per task."""
    path = Path(path)
    try:
        rows = json.loads(path.read_text())
    except OSError as exc:
        raise RecordingError(f"--simulate {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordingError(f"--simulate {path}: not JSON ({exc})") from None
    try:
        points = _POINTS.validate_python(rows)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"] if "[" not in str(p))
        what = "expected a JSON list of recorded points" if not isinstance(rows, list) else first["msg"]
        raise RecordingError(
            f"--simulate {path}: {where or 'the top level'}: {what} (each has template, params, status, shape_times)"
        ) from None
    shapes = [shape_key(s) for s in problem.benchmarks] if problem else []
    for index, point in enumerate(points):
        missing = [k for k in shapes if k not in (point.shape_times or {})] if point.status == Status.OK else []
        if missing:
            raise RecordingError(
                f"--simulate {path}: [{index}] ({point.template}) is ok but has no time for {problem.name}'s "
                f"benchmark shape {missing[0]} (a recording of another problem?)"
            )
    return rows


class Simulator:
    def __init__(self, recording: Path | None = None):
        self.recording = recording
        self.hold_s = float(os.environ.get("KSCI_SIMULATE_HOLD_S", "0"))
        rows = load_recording(recording) if recording else []
        self.table = {(r["template"], json.dumps(r["params"], sort_keys=True)): r for r in rows}

    def recorded(self, source: str) -> dict | None:
        if composed_plan(source) is not None:
            return None  # its variants' provenance lines are not the composed kernel's
        point = provenance(source)
        return self.table.get((point[0], json.dumps(point[1], sort_keys=True))) if point else None

    def compile(self, source: str, target: str, arch: str) -> CompileResult:
        digest = source_hash(source)
        recorded = (self.recorded(source) or {}).get("status") == Status.COMPILE_ERROR
        asked = directive(source) == Status.COMPILE_ERROR
        failed = recorded or asked
        log = "simulated compile"
        if failed:
            log = "simulated: recorded as compile_error" if recorded else "simulated: error: // ksci-simulate directive"
        return CompileResult(
            ok=not failed,
            target=target,
            arch=arch,
            toolchain=SIMULATOR_TOOLCHAIN,
            command=[],
            log=log,
            library=None if failed else f"simulated://{digest[:16]}",
            source_hash=digest,
        )

    def run(
        self, problem: Problem, source: str, compiled: CompileResult, phases: tuple[str, ...], held_out: int = 0
    ) -> Verdict:
        """A simulated verdict; `held_out` shapes are drawn for verification as a real run draws them."""
        time.sleep(self.hold_s)  # the GPU time it stands for (0 unless asked)
        verdict = Verdict(
            Status.OK,
            problem.name,
            compiled.target,
            compile=compiled,
            fingerprint={"gpu": SIMULATED_GPU, "recording": str(self.recording)},
        )
        point, row = provenance(source), self.recorded(source)
        if row and row["status"] == "environment_error":  # stands for a GPU that went away mid-run
            raise EnvironmentProblem(f"simulated: the GPU went away while running {point[0]} {point[1]}")
        if row and row["status"] != Status.OK:
            verdict.status, verdict.message = Status(row["status"]), f"simulated: recorded as {row['status']}"
            return verdict
        asked = directive(source)
        drawn = draw_held_out(problem, held_out) if "verify" in phases and held_out else []
        if drawn:
            verdict.fingerprint["held_out"] = drawn
        if asked == "shape_table" and drawn:
            verdict.status = Status.WRONG
            verdict.message = (
                f"wrong on held-out shape {shape_key(drawn[0])} seed {drawn[0]['seed']}: on spec inputs: simulated: "
                "a shape-table kernel (// ksci-simulate directive), right on the listed shapes only"
            )
            return verdict
        if asked in {s.value for s in Status} - {Status.OK, Status.COMPILED}:
            verdict.status, verdict.message = Status(asked), f"simulated: {asked} (// ksci-simulate directive)"
            return verdict
        verdict.message = "simulated: replayed from the recording" if row else "simulated: made-up timing"
        if "benchmark" in phases:
            times = row["shape_times"] if row else self._times_of(problem, source)
            verdict.timings = [_shape_timing(s, times[shape_key(s)]) for s in problem.benchmarks]
            verdict.geomean_us = geomean(list(times.values()))
            verdict.reference_geomean_us = row.get("reference_geomean_us") if row else 1000.0
            verdict.vendor_geomean_us = row.get("vendor_geomean_us") if row else 50.0
        return verdict

    def _times_of(self, problem: Problem, source: str) -> dict[str, float]:
        plan = composed_plan(source)
        if plan is None:
            return self._made_up(problem, source)
        variants = [self._variant_times(problem, m) for m in _PROVENANCE.finditer(source)]
        return {k: variants[plan["shapes"].get(k, plan["default"])][k] for k in map(shape_key, problem.benchmarks)}

    def _variant_times(self, problem: Problem, match: re.Match) -> dict[str, float]:
        """A variant's times: its recorded ones, else those made up for its point rendered alone."""
        template, params = provenance(match.group(0))
        row = self.table.get((template, json.dumps(params, sort_keys=True)))
        if row and row["status"] == Status.OK:
            return row["shape_times"]
        try:
            alone = render_kernel(problem.template(match.group(1), template), params)
        except ProblemError:
            alone = match.group(0)
        return self._made_up(problem, alone)

    def _made_up(self, problem: Problem, source: str) -> dict[str, float]:
        """A template point's times from the cost model (ksci.backends.cost_model); a hand-written source's from
        its text alone (nothing in it to model)."""
        point = provenance(source)
        if point is not None:
            return {shape_key(s): point_time_us(point[0], point[1], s) for s in problem.benchmarks}
        factor = 0.2 + _unit(source) * 3.0
        return {
            shape_key(s): factor * 100.0 * (1 + i % 3) * (0.7 + 0.6 * _unit(f"{source}\0{shape_key(s)}"))
            for i, s in enumerate(problem.benchmarks)
        }


class SimulatedBackend:
    """The simulator as a run's backend: `recording` is a recording's path, or None for made-up timings only."""

    def __init__(self, recording: str | None) -> None:
        self.recording = recording

    @property
    def identity(self) -> str:
        # By name: a test rewrites a recording's rows to stand for a GPU that came back.
        return f"simulator:{Path(self.recording).name if self.recording else 'none'}"

    def compiler_identity(self, arch: str | None) -> str:
        return SIMULATOR_TOOLCHAIN

    def compile(self, source: str, options: EvaluationOptions) -> CompileResult:
        """The static screen first, as on the real path (a source it refuses is rejected, with the same message),
        then the simulated compile; no compiler runs, so there is nothing to sandbox."""
        if (refused := screen_refusal(source, options)) is not None:
            return refused
        return Simulator(self.recording).compile(source, options.target, options.arch or "simulated")

    def runner(
        self, problem: Problem, source: str, compiled: CompileResult, options: EvaluationOptions, spares: int = 0
    ) -> SimulatedRun:
        return SimulatedRun(Simulator(self.recording), problem, source, compiled, options.phases, options.held_out)

    def baseline_runner(self, problem: Problem, options: EvaluationOptions, spares: int = 0) -> SimulatedBaselines:
        return SimulatedBaselines(problem, options.target)

    def start_spares(self, problem: Problem, options: EvaluationOptions, count: int) -> None:
        """The simulator starts no process."""


class SimulatedBaselines:
    """The simulator's baseline run: no shape timed. Its candidates' verdicts carry the baselines their recording
    (or the made-up numbers) gives, which a merge leaves as they are (ksci.evaluate.stage_order.with_baselines)."""

    def __init__(self, problem: Problem, target: str) -> None:
        self.problem, self.target = problem, target

    def start(self) -> None:
        """Nothing to start ahead."""

    def run(self, device: str | None) -> Verdict:
        fingerprint = {"gpu": SIMULATED_GPU, "gpu_window": {"phases": ["baselines"], "device": device}}
        return Verdict(Status.OK, self.problem.name, self.target, "simulated: no baselines", fingerprint=fingerprint)

    def __enter__(self) -> SimulatedBaselines:
        return self

    def __exit__(self, *exc) -> None:
        return None


class SimulatedRun:
    """A simulated run of a candidate's phases; its verdict's GPU window names the GPU it held."""

    def __init__(
        self,
        simulator: Simulator,
        problem: Problem,
        source: str,
        compiled: CompileResult,
        phases: tuple[str, ...],
        held_out: int = 0,
    ) -> None:
        self.simulator, self.problem, self.source, self.compiled = simulator, problem, source, compiled
        self.phases, self.held_out = phases, held_out

    def start(self) -> None:
        """Nothing to start ahead."""

    def run(self, device: str | None) -> Verdict:
        verdict = self.simulator.run(self.problem, self.source, self.compiled, self.phases, self.held_out)
        verdict.fingerprint["gpu_window"] = {"phases": list(self.phases), "device": device}
        return verdict

    def __enter__(self) -> SimulatedRun:
        return self

    def __exit__(self, *exc) -> None:
        return None


_unit = unit


def _shape_timing(shape: dict, median_us: float) -> ShapeTiming:
    return ShapeTiming(shape=dict(shape), kernel=Timing(median_us=median_us, iqr_us=0.0, min_us=median_us, reps=1))


def recording_from_lineage(frame) -> list[dict]:
    """The rows of a real lineage as a simulator recording (one entry per rendered template point)."""
    entries = {}
    for _, row in frame.iterrows():
        if not isinstance(row["template"], str) or not isinstance(row["params_json"], str):
            continue  # a hand-written or LLM-written kernel has no template point to replay
        entries[(row["template"], row["params_json"])] = {
            "template": row["template"],
            "params": json.loads(row["params_json"]),
            "status": row["status"],
            "shape_times": shape_times(row["shape_times_json"]),
            "reference_geomean_us": _number(row["reference_geomean_us"]),
            "vendor_geomean_us": _number(row["vendor_geomean_us"]),
            "gpu": row["gpu"] if isinstance(row["gpu"], str) else None,
        }
    return list(entries.values())


def _number(value) -> float | None:
    return None if value is None or value != value else float(value)  # NaN is missing


def is_simulated(row) -> bool:
    """Whether one lineage row (a dict or a pandas row) came from this simulator: it names itself as the GPU of its
    verdicts and as the toolchain of its compiles, so rows of failed compiles are recognised too."""
    if row.get("gpu") == SIMULATED_GPU:
        return True
    try:
        fingerprint = json.loads(row.get("fingerprint_json") or "{}")
    except (TypeError, ValueError):
        return False
    return fingerprint.get("gpu") == SIMULATED_GPU or fingerprint.get("toolchain") == SIMULATOR_TOOLCHAIN


def main(argv: list[str] | None = None) -> None:
    """python -m ksci.backends.simulated --store DIR --run RUN -o recording.json"""
    import argparse

    from ksci.lineage.store import LineageStore

    parser = argparse.ArgumentParser(
        allow_abbrev=False, description="Write a simulator recording from a lineage recorded on a GPU."
    )
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("-o", "--output", required=True, type=Path)
    args = parser.parse_args(argv)
    recording = recording_from_lineage(LineageStore(args.store).read(args.run))
    args.output.write_text(json.dumps(recording, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(recording)} recorded points to {args.output}")


if __name__ == "__main__":
    main()
