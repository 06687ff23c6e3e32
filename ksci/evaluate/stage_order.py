"""The one stage ordering of an evaluation: prepare (entry point; hipify CUDA bound for ROCm), compile (screen,
compiler, library check), then verify and time in the isolated harness child, classified into a verdict.

Every path takes it: the command line and the benchmarks (`evaluate_source`, both phases in one harness run), the
Prefect tasks (tasks/evaluation.py: hipify, compile, and verify and benchmark in one GPU task, each cached) and
rebench through them; so the hipify note and a compile failure's verdict (its fingerprint too) are the same on
each. What compiles and runs is a Backend (ksci/backends/), the real one unless a run's setup chose the simulator.
Candidate failures come back as a Verdict; problems of the environment (no compiler, no GPU) raise.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from ksci.backends import Backend
from ksci.backends.real import RealBackend
from ksci.evaluate.host_stages import (
    PreparedSource,
    failed_compile_verdict,
    host_fingerprint,
    prepare,
    unprepared_compile,
)
from ksci.evaluate.judge.classify import baseline_geomeans
from ksci.evaluate.judge.neighbours import gpu_neighbours, with_neighbours
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import CompileResult, Status, Verdict
from ksci.evaluate.run.isolate import live_children
from ksci.problem.spec import Problem, shape_key

# Given a callback to call when the candidate is near the front of the queue, a block that holds a GPU and yields
# its index (None: whichever this process may see). The flow's tasks take one from ksci.devices.any_free_gpu.
TakeGpu = Callable[[Callable[[], None]], AbstractContextManager[str | None]]


def evaluate_source(
    problem: Problem, source: str, options: EvaluationOptions, backend: Backend | None = None
) -> Verdict:
    """Prepare, compile, then verify and time (options.phases) in one harness run, on GPU options.device."""
    backend = backend or RealBackend(options.target)
    prepared = prepare(problem, source, options.target)
    compiled = compile_prepared(backend, prepared, options)
    if compiled.ok and options.compile_only:
        fingerprint = host_fingerprint(compiled)
        return Verdict(Status.COMPILED, problem.name, options.target, prepared.note, compiled, fingerprint=fingerprint)
    return run_compiled(backend, problem, prepared, compiled, options)


def compile_prepared(backend: Backend, prepared: PreparedSource, options: EvaluationOptions) -> CompileResult:
    """The compile step: a source that could not be prepared never reaches the compiler, and its result says why
    (the note first, then the converter's log)."""
    if not prepared.ok:
        return unprepared_compile(prepared, options)
    return backend.compile(prepared.source, options)


def run_compiled(
    backend: Backend,
    problem: Problem,
    prepared: PreparedSource,
    compiled: CompileResult,
    options: EvaluationOptions,
    take_gpu: TakeGpu | None = None,
    spares: int = 0,
) -> Verdict:
    """Run options.phases of a compiled candidate and classify the outcome; a candidate without a library gets the
    verdict of its compile. The run is made ready (its harness process started) when `take_gpu` says the
    candidate is near the front of the queue, and gets its GPU once one is free; without `take_gpu`, GPU
    options.device. A verdict with no message of its own carries the preparation's note (e.g. "converted from
    CUDA with hipify-perl")."""
    if not compiled.ok:
        return failed_compile_verdict(problem.name, options.target, compiled)
    take_gpu = take_gpu or (lambda on_turn: nullcontext(options.device))
    with backend.runner(problem, prepared.source, compiled, options, spares) as run, take_gpu(run.start) as device:
        verdict = run.run(device)
        if verdict.status == Status.SUSPICIOUS:  # whoever else is on the GPU shared it; this process's own harness
            # children are left out: the next candidate's may have started since the hand-over (ksci.devices.Lease)
            uuid = verdict.fingerprint.get("gpu_uuid")
            neighbours = gpu_neighbours(uuid, options.target, live_children())
            verdict.message = with_neighbours(verdict.message, neighbours)
    verdict.message = verdict.message or prepared.note
    return verdict


def run_baselines(
    backend: Backend, problem: Problem, options: EvaluationOptions, take_gpu: TakeGpu, spares: int = 0
) -> Verdict:
    """Time the reference and the vendor library alone on a GPU `take_gpu` gives, their harness made ready when the
    turn is near (as run_compiled's): a run's baselines, which its candidates' GPU steps take (with_baselines)."""
    with backend.baseline_runner(problem, options, spares) as run, take_gpu(run.start) as device:
        return run.run(device)


def with_baselines(timed: Verdict, baselines: Verdict) -> Verdict:
    """A candidate's verdict timed without the baselines (an evolution times the reference and the vendor library
    once per generation, run_baselines, not beside every candidate: issue 28), given them: each shape's reference
    and vendor times where its own run has none, and their geomeans (classify.baseline_geomeans). A verdict that
    has its own keeps them; the fingerprint says where they were timed (`baselines_gpu_window`)."""
    measured = {shape_key(t.shape): t for t in baselines.timings}
    if not timed.timings or not measured:
        return timed
    for timing in timed.timings:
        base = measured.get(shape_key(timing.shape))
        if base is not None:
            timing.reference = timing.reference or base.reference
            timing.vendor = timing.vendor or base.vendor
    reference, vendor = baseline_geomeans(timed.timings)
    timed.reference_geomean_us = timed.reference_geomean_us or reference
    timed.vendor_geomean_us = timed.vendor_geomean_us or vendor
    timed.fingerprint["baselines_gpu_window"] = baselines.fingerprint.get("gpu_window")
    return timed
