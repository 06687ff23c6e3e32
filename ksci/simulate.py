"""A GPU SIMULATOR for tests and demos on machines without a GPU (Kernel Tuner's simulation idea).

It replays timings recorded on a real GPU (a JSON list written by benchmarks/record_space.py, or exported from a
lineage) for the (template, parameters) point named in a rendered kernel's provenance line. Points that were not
recorded get a deterministic made-up time, so that search code can be exercised; every verdict it returns says
in its fingerprint and message that it was simulated. Nothing it returns is a measurement.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ksci.compile import source_hash
from ksci.evaluate import EnvironmentProblem
from ksci.problem import Problem, shape_key
from ksci.results import CompileResult, ShapeTiming, Status, Timing, Verdict, geomean

_PROVENANCE = re.compile(r"^// ksci: rendered from (\w+)/(\w+) with (.*)$", re.M)
SIMULATED_GPU = "SIMULATOR"


def provenance(source: str) -> tuple[str, dict] | None:
    """(template, params) from the first line that ksci.render writes, or None for a hand-written source."""
    match = _PROVENANCE.search(source)
    if not match:
        return None
    params = {}
    for item in match.group(3).split():
        name, _, value = item.partition("=")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    return match.group(2), params


class Simulator:
    def __init__(self, recording: Path | None = None):
        self.recording = recording
        rows = json.loads(Path(recording).read_text()) if recording else []
        self.table = {(r["template"], json.dumps(r["params"], sort_keys=True)): r for r in rows}

    def compile(self, source: str, target: str, arch: str) -> CompileResult:
        digest = source_hash(source)
        return CompileResult(
            ok=True,
            target=target,
            arch=arch,
            toolchain="simulator",
            command=[],
            log="simulated compile",
            library=f"simulated://{digest[:16]}",
            source_hash=digest,
        )

    def run(self, problem: Problem, source: str, compiled: CompileResult, phases: tuple[str, ...]) -> Verdict:
        verdict = Verdict(
            Status.OK,
            problem.name,
            compiled.target,
            compile=compiled,
            fingerprint={"gpu": SIMULATED_GPU, "recording": str(self.recording)},
        )
        point = provenance(source)
        row = self.table.get((point[0], json.dumps(point[1], sort_keys=True))) if point else None
        if row and row["status"] == "environment_error":  # stands for a GPU that went away mid-run
            raise EnvironmentProblem(f"simulated: the GPU went away while running {point[0]} {point[1]}")
        if row and row["status"] != Status.OK:
            verdict.status, verdict.message = Status(row["status"]), f"simulated: recorded as {row['status']}"
            return verdict
        verdict.message = "simulated: replayed from the recording" if row else "simulated: made-up timing"
        if "benchmark" in phases:
            times = row["shape_times"] if row else self._made_up(problem, source)
            verdict.timings = [_shape_timing(s, times[shape_key(s)]) for s in problem.benchmarks]
            verdict.geomean_us = geomean(list(times.values()))
            verdict.reference_geomean_us = row.get("reference_geomean_us") if row else 1000.0
            verdict.vendor_geomean_us = row.get("vendor_geomean_us") if row else 50.0
        return verdict

    def _made_up(self, problem: Problem, source: str) -> dict[str, float]:
        factor = 0.2 + int(hashlib.sha256(source.encode()).hexdigest()[:6], 16) / 0xFFFFFF * 3.0
        return {shape_key(s): factor * 100.0 * (1 + i % 3) for i, s in enumerate(problem.benchmarks)}


def _shape_timing(shape: dict, median_us: float) -> ShapeTiming:
    return ShapeTiming(shape=dict(shape), kernel=Timing(median_us=median_us, iqr_us=0.0, min_us=median_us, reps=1))
