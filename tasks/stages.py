"""One Prefect task per stage of a generation; each body is a call into the plain core (ksci/).

Caching: a task's result is keyed by its inputs and its source (INPUTS + TASK_SOURCE), and persisted under
data/prefect, so rerunning a generation reuses every compile, verification and benchmark that finished. The
compile, verify and benchmark tasks are keyed also on what decides their result beyond their inputs (the
screen's, harness's and problem's files, the toolchain, the host's GPU model and driver), and not on the GPU ids;
render and compose on the problem's templates, hipify on the conversion's code and the converters found,
hypothesize on the proposer's code: tasks/cache_keys.py.
Timeouts: foreign code only ever runs in subprocesses with their own hard timeouts (the compiler's, and the
harness's process-group kill), because Prefect's task timeout cannot interrupt a task in a worker thread.
Retries: only for EnvironmentProblem (a harness that could not start, a GPU that went away); a compile error or
a wrong answer is a value, never an exception, and is never retried.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.tasks import exponential_backoff

from ksci.backends.simulated import Simulator
from ksci.devices import START_AHEAD, any_free_gpu
from ksci.evaluate.pipeline import (
    SPARES,
    EnvironmentProblem,
    EvaluationOptions,
    Harness,
    PreparedSource,
    compile_candidate,
    failed_compile_verdict,
    gpu_visible,
    harness_request,
    prepare,
    run_phases,
    unprepared_compile,
)
from ksci.evaluate.results import CompileResult, Status, Verdict
from ksci.lineage.store import LineageStore, candidate_from_verdict, candidate_id_of
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem
from ksci.proposers.select import Selection, select_parents
from ksci.proposers.tuning import Proposal, propose_tuning
from tasks.cache_keys import COMPILE_CACHE, HIPIFY_CACHE, PROPOSAL_CACHE, RENDER_CACHE, VERDICT_CACHE

CACHED = INPUTS + TASK_SOURCE
LOGGED_OUTPUT_CHARS = 4000


def retry_only_on(error: type[Exception]):
    """A retry_condition_fn that retries a task only when it failed with `error` (or a subclass)."""

    def condition(task, task_run, state) -> bool:
        try:
            state.result()
        except error:
            return True
        except Exception:
            return False
        return False

    return condition


# Retry only when the environment failed, never for what the candidate did.
retry_on_environment = retry_only_on(EnvironmentProblem)


@task(name="read-population")
def read_population(store_root: str, run: str, before_generation: int) -> pd.DataFrame:
    population = LineageStore(store_root).read(run)
    earlier = population[population["generation"] < before_generation]
    # A stable order, so that the proposals (and with them every cache key downstream) are the same on a rerun.
    return earlier.sort_values(["generation", "candidate_id"]).reset_index(drop=True)


@task(name="select", cache_policy=CACHED)
def select(strategy: str, population: pd.DataFrame, count: int, seed: int) -> list[Selection]:
    return select_parents(strategy, population, count, seed)


@task(name="hypothesize", cache_policy=PROPOSAL_CACHE)
def hypothesize(
    problem: str,
    dialect: str,
    population: pd.DataFrame,
    selections: list[Selection],
    count: int,
    seed: int,
    in_flight: list[Proposal] | None = None,
) -> list[Proposal]:
    return propose_tuning(load_problem(problem), dialect, population, selections, count, seed, in_flight)


@task(name="render", cache_policy=RENDER_CACHE)
def render(problem: str, dialect: str, template: str, params: dict) -> str:
    return render_kernel(load_problem(problem).template(dialect, template), params)


@task(name="hipify", cache_policy=HIPIFY_CACHE)
def hipify(problem: str, source: str, target: str) -> PreparedSource:
    """CUDA bound for ROCm is converted; a source that cannot be (or lacks the entry point) comes back not ok, with
    the converter's report, and the compile step fails it with that report instead of compiling it."""
    return prepare(load_problem(problem), source, target)


@task(name="compile", cache_policy=COMPILE_CACHE, tags=["compile"])
def compile_kernel(source: PreparedSource | str, target: str, arch: str | None, simulate: str | None) -> CompileResult:
    options = EvaluationOptions(target=target, arch=arch)
    if isinstance(source, PreparedSource) and not source.ok:
        return unprepared_compile(source, options)
    if simulate is not None:
        return Simulator(_recording(simulate)).compile(text_of(source), target, arch or "simulated")
    return compile_candidate(text_of(source), options)


def text_of(source: PreparedSource | str) -> str:
    """The text a later stage works on: the converted source, or the source as it came where it was not."""
    return source.source if isinstance(source, PreparedSource) else source


GPU_TASK = dict(
    cache_policy=VERDICT_CACHE,
    retries=2,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_condition_fn=retry_on_environment,
    tags=["gpu"],
)


@task(name="verify", **GPU_TASK)
def verify_kernel(
    problem: str,
    source: PreparedSource | str,
    compiled: CompileResult,
    target: str,
    gpus: list[str],
    simulate: str | None,
) -> Verdict:
    return _run(problem, text_of(source), compiled, target, gpus, simulate, ("verify",))


@task(name="benchmark", **GPU_TASK)
def benchmark_kernel(
    problem: str,
    source: PreparedSource | str,
    compiled: CompileResult,
    verified: Verdict,
    target: str,
    gpus: list[str],
    simulate: str | None,
) -> Verdict:
    if verified.status != Status.OK:
        return verified
    timed = _run(problem, text_of(source), compiled, target, gpus, simulate, ("benchmark",))
    timed.checks = verified.checks + timed.checks
    timed.fingerprint["verify_gpu_window"] = verified.fingerprint.get("gpu_window")
    return timed


def _run(problem, source, compiled, target, gpus, simulate, phases) -> Verdict:
    """The GPU is not an input (so not part of the cache key): the candidate takes whichever is free."""
    spec = load_problem(problem)
    if not compiled.ok:
        return failed_compile_verdict(problem, target, compiled)  # rejected by the static screen, or did not compile
    # One candidate at a time per GPU, across every flow, worker and process of this host (ksci.devices).
    if simulate is not None:
        with any_free_gpu(gpus) as gpu:
            verdict = Simulator(_recording(simulate)).run(spec, source, compiled, phases)
            verdict.fingerprint["gpu_window"] = {"phases": list(phases), "device": gpu}
            return verdict
    options = _harness_options(target, phases)
    # The candidate takes its harness process when it is near the front of the queue (START_AHEAD), while the GPUs
    # are still busy: a spare one, started earlier for any candidate, whose Python and torch have loaded by then.
    # It gets its GPU and the library once the slot is taken: only the GPU context's start is left inside the GPU's
    # busy time.
    harness = Harness(spec, compiled.library, options, spares=_spares(gpus))
    with harness, any_free_gpu(gpus, on_turn=harness.start) as gpu:
        return run_phases(spec, compiled, replace(options, device=gpu), harness)


def _spares(gpus: list[str]) -> int:
    """Spare harness processes kept per phase: as many as the waiters that take one (START_AHEAD per GPU), so that
    the candidates of a generation, compiled at about the same time, all find one that has finished starting."""
    return START_AHEAD * len(gpus)


def start_spare_harnesses(problem: str, target: str, gpus: list[str], simulate: str | None) -> None:
    """Start the spare harness processes of verify and benchmark now (a run's start), so that the first candidates
    find them ready instead of each starting its own inside its GPU window."""
    if simulate is not None or not gpu_visible(target):
        return  # the simulator starts none; without a GPU the GPU tasks will say so
    spec = load_problem(problem)
    for phases in (("verify",), ("benchmark",)):
        SPARES.fill(harness_request(spec, _harness_options(target, phases)), _spares(gpus))


def _harness_options(target: str, phases: tuple[str, ...]) -> EvaluationOptions:
    """The options of a GPU task's harness (the spares started at a run's start are started with the same)."""
    return EvaluationOptions(target=target, phases=phases)


def log_failure(candidate_id: str, verdict: Verdict) -> None:
    """Put a failed candidate's compiler or harness output in the flow run's logs (the Prefect UI shows them)."""
    output = verdict.harness_log or (verdict.compile.log if verdict.compile else "")
    get_run_logger().warning(
        "candidate %s: %s: %s\n%s", candidate_id, verdict.status, verdict.message, output[-LOGGED_OUTPUT_CHARS:]
    )


@task(name="record")
def record_candidate(
    store_root: str, meta: dict, source: PreparedSource | str, source_path: str, verdict: Verdict
) -> dict:
    """Append the candidate's row as soon as it is done; idempotent, so a rerun never duplicates it."""
    row = candidate_from_verdict(
        verdict, source_path=source_path, candidate_id=candidate_id_of(text_of(source)), **meta
    )
    if verdict.status != Status.OK:
        log_failure(row.candidate_id, verdict)
    LineageStore(store_root).append([row])
    return asdict(row)


@task(name="store-source", cache_policy=CACHED)
def store_source(store_root: str, source: PreparedSource | str, suffix: str) -> str:
    return LineageStore(store_root).put_source(text_of(source), suffix)


def _recording(simulate: str):
    return simulate or None  # "" means: simulate without a recording (made-up timings only)
