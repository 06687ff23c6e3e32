"""The evaluation's Prefect tasks, one per stage, each a call into the stage ordering (ksci/evaluate/stage_order.py),
and `submit_candidate`, the one function that submits a candidate's whole chain: hipify, compile, verify and
benchmark (one GPU task, `verify_and_benchmark`: one harness process a candidate), store its source, record its
row. The evolve flow (tuning and LLM candidates) and rebench use it.
The evolve flow times the baselines (the reference and the vendor library) once per generation
(`generation_baselines`), and each benchmark takes them; rebench times them beside each champion.

Every task takes the run's EvaluationSetup; the backend (real or simulated) is chosen from it by
ksci.backends.backend_of, never by a branch here.
Caching (tasks/cache_keys.py): compile and the GPU step are keyed on their inputs, their source and what
decides their result beyond them (the harness's and the problem's files, the toolchain, the backend's identity),
not on the GPU ids; a rerun of a generation reuses every step that finished.
Timeouts: foreign code only ever runs in subprocesses with their own hard timeouts (the compiler's, and the
harness's process-group kill), because Prefect's task timeout cannot interrupt a task in a worker thread.
Retries: only for EnvironmentProblem (a harness that could not start, a GPU that went away); a compile error or
a wrong answer is a value, never an exception, and is never retried.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import NamedTuple

from prefect import get_run_logger, task
from prefect.futures import PrefectFuture
from prefect.tasks import exponential_backoff

from ksci.backends import backend_of
from ksci.devices import START_AHEAD, any_free_gpu
from ksci.evaluate.host_stages import PreparedSource, prepare
from ksci.evaluate.options import EnvironmentProblem, compile_options, run_options
from ksci.evaluate.results import CompileResult, Status, Verdict
from ksci.evaluate.setup import EvaluationSetup
from ksci.evaluate.stage_order import (
    compile_prepared,
    run_baselines,
    run_compiled,
    with_baselines,
)
from ksci.lineage.store import CandidateMeta, LineageStore, candidate_from_verdict, candidate_id_of
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, load_problem
from tasks.cache_keys import COMPILE_CACHE, HIPIFY_CACHE, VERDICT_CACHE
from tasks.proposing import CACHED, retry_only_on

LOGGED_OUTPUT_CHARS = 4000
CANDIDATE_PHASES = ("verify", "benchmark")  # one harness run a candidate (verify_and_benchmark)

GPU_TASK = dict(
    cache_policy=VERDICT_CACHE,
    retries=2,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_condition_fn=retry_only_on(EnvironmentProblem),  # the environment failed, never the candidate
    tags=["gpu"],
)


@task(name="hipify", cache_policy=HIPIFY_CACHE)
def hipify(setup: EvaluationSetup, source: str) -> PreparedSource:
    """CUDA bound for ROCm is converted; a source that cannot be (or lacks the entry point) comes back not ok, with
    the converter's report, and the compile step fails it with that report instead of compiling it."""
    return prepare(load_problem(setup.problem), source, setup.target)


@task(name="compile", cache_policy=COMPILE_CACHE, tags=["compile"])
def compile_kernel(setup: EvaluationSetup, source: PreparedSource) -> CompileResult:
    return compile_prepared(backend_of(setup), source, compile_options(setup))


@task(name="verify-and-benchmark", **GPU_TASK)
def verify_and_benchmark(
    setup: EvaluationSetup,
    source: PreparedSource,
    compiled: CompileResult,
    race: tuple[tuple[str, float], ...] = (),
    baselines: Verdict | None = None,
) -> Verdict:
    """The candidate's two GPU steps, verify and then benchmark, in one harness process and one GPU window: the
    process's start (the GPU context) and its first use of each kernel (cuBLAS's start, kernels loaded on first
    use) are paid once per candidate, not once per step (issue 28: about 0.8 s of a new process's first checks
    against 0.2 s warm, benchmarks/check_cost.py; on one H200 a candidate's GPU windows went from 2.80 s in two to
    2.06 s in one, docs/results.md). Nothing of the verdict changes: the child verifies every input
    set first and times nothing unless all pass, waits for the GPU to be clear before its first timed call, and
    checks again after timing, as two runs did; its checks and timings come back in one verdict.

    `race`: the run's best median per shape (ksci evolve --race), an input like the others: the verdict depends on
    it (how many calls a losing shape gets). `baselines`: the generation's reference and vendor times
    (generation_baselines); the candidate's harness then times the candidate alone and its verdict takes them
    (with_baselines). Without them, they are timed beside it in its own harness run (rebench)."""
    verdict = _run(setup, source, compiled, CANDIDATE_PHASES, race, time_baselines=baselines is None)
    return verdict if baselines is None else with_baselines(verdict, baselines)


@task(name="baselines", **GPU_TASK)
def generation_baselines(setup: EvaluationSetup, run: str, generation: int) -> Verdict:
    """The reference and the vendor library timed alone on every benchmark shape, once per generation (`run` and
    `generation` key its cache: a rerun of the generation reuses them, and its candidates' benchmarks with them),
    on the GPU lock like a candidate. Timing them beside every candidate cost about 0.6-2 s of each candidate's GPU
    time on an H100 (issue 28); the comparison with the vendor stays within the generation, on the same host."""
    problem, options = load_problem(setup.problem), run_options(setup, ("benchmark",), time_baselines=False)
    return run_baselines(backend_of(setup), problem, options, _take_gpu(setup), _spares(setup))


def _run(
    setup: EvaluationSetup,
    source: PreparedSource,
    compiled: CompileResult,
    phases: tuple[str, ...],
    race: tuple[tuple[str, float], ...] = (),
    time_baselines: bool = True,
) -> Verdict:
    """The GPU is not an input (so not part of the cache key): the candidate takes whichever is free, one candidate
    at a time per GPU across every flow, worker and process of this host (ksci.devices). It takes its harness
    process when it is near the front of the queue (START_AHEAD), while the GPUs are still busy: a spare one,
    started earlier for any candidate, whose Python and torch have loaded by then. It gets its GPU and the library
    once the GPU is taken: only the GPU context's start is left inside the GPU's busy time."""
    problem, options = load_problem(setup.problem), run_options(setup, phases, race, time_baselines)
    return run_compiled(backend_of(setup), problem, source, compiled, options, _take_gpu(setup), _spares(setup))


def _take_gpu(setup: EvaluationSetup):
    """Block on whichever of the run's GPUs is free first (ksci.devices.any_free_gpu), `on_turn` called once the
    step is near the front of the queue."""
    gpus = list(setup.gpus)

    def take_gpu(on_turn):
        return any_free_gpu(gpus, on_turn=on_turn)

    return take_gpu


def _spares(setup: EvaluationSetup) -> int:
    """Spare harness processes kept per phase: as many as the waiters that take one (START_AHEAD per GPU), so that
    the candidates of a generation, compiled at about the same time, all find one that has finished starting."""
    return START_AHEAD * len(setup.gpus)


def start_spare_harnesses(setup: EvaluationSetup) -> None:
    """Start the spare harness processes of the candidates' GPU step now (a run's start), so that the first
    candidates find them ready instead of each starting its own inside its GPU window (the simulator starts none)."""
    problem, backend = load_problem(setup.problem), backend_of(setup)
    backend.start_spares(problem, run_options(setup, CANDIDATE_PHASES, time_baselines=False), _spares(setup))


@task(name="store-source", cache_policy=CACHED)
def store_source(store_root: str, source: PreparedSource, suffix: str) -> str:
    return LineageStore(store_root).put_source(source.source, suffix)


@task(name="record")
def record_candidate(
    store_root: str, meta: CandidateMeta, source: PreparedSource, source_path: str, verdict: Verdict
) -> dict:
    """Append the candidate's row as soon as it is done; idempotent, so a rerun never duplicates it."""
    row = candidate_from_verdict(verdict, meta, source_path, candidate_id_of(source.source))
    if verdict.status != Status.OK:
        log_failure(row.candidate_id, verdict)
    LineageStore(store_root).append([row])
    return asdict(row)


def log_failure(candidate_id: str, verdict: Verdict) -> None:
    """Put a failed candidate's compiler or harness output in the flow run's logs (the Prefect UI shows them)."""
    output = verdict.harness_log or (verdict.compile.log if verdict.compile else "")
    get_run_logger().warning(
        "candidate %s: %s: %s\n%s", candidate_id, verdict.status, verdict.message, output[-LOGGED_OUTPUT_CHARS:]
    )


class CandidateChain(NamedTuple):
    """The futures of one candidate's chain. A tuple too, so that callers may unpack it or take `[-1]` (recorded)."""

    compiled: PrefectFuture
    evaluated: PrefectFuture  # verify_and_benchmark's verdict
    stored: PrefectFuture | None  # store_source's (None: the store held the source already)
    recorded: PrefectFuture


def submit_candidate(
    setup: EvaluationSetup,
    source: str | PrefectFuture,
    meta: CandidateMeta,
    source_path: str | None = None,
    retime: bool = False,
    race: tuple[tuple[str, float], ...] = (),
    baselines: PrefectFuture | None = None,
) -> CandidateChain:
    """Submit a candidate's whole chain: hipify, compile, verify and benchmark (one GPU step), store its source,
    record its row.

    `source`: the text, or the future of the task that renders it. `source_path`: where the store already holds
    it (rebench: the row keeps its source's path), else it is stored. `retime`: verify and benchmark again, not
    from the cache (rebench). `race`: the run's best median per shape, to stop timing shapes the candidate loses
    (ksci evolve --race). `baselines`: the future of the generation's generation_baselines, whose times the
    benchmark takes; None: the benchmark times them beside the candidate."""
    on_gpu = verify_and_benchmark.with_options(refresh_cache=True) if retime else verify_and_benchmark
    prepared = hipify.submit(setup, source)
    compiled = compile_kernel.submit(setup, prepared)
    evaluated = on_gpu.submit(setup, prepared, compiled, race, baselines)
    stored = None
    if source_path is None:
        suffix = SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[setup.target]]
        source_path = stored = store_source.submit(setup.store_root, prepared, suffix)
    recorded = record_candidate.submit(setup.store_root, meta, prepared, source_path, evaluated)
    return CandidateChain(compiled, evaluated, stored, recorded)
