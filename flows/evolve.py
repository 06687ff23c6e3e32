"""The evolution as Prefect flows: `evolve` runs generations; `evolve_generation` is the unit that fails and is rerun.

A generation: read the population, let the run's proposer (ksci.proposers: tuning, or the LLM scientist) propose
children and submit each candidate's chain (tasks/evaluation.py: hipify, compile in parallel on the CPU cores,
verify and benchmark one at a time per GPU, record each candidate as soon as it is done), then let it conclude.
Every stage's result is cached by its inputs, and proposals are a deterministic function of the generations
before, so a rerun of a failed or killed generation reuses what had finished and records no row twice.
With `overlap` k > 0 (tuning proposer), generations run side by side: generation g learns from the generations
before max(0, g - k) and starts while the k before it are still on the GPUs (ksci.proposers.overlap).
Deployed (prefect.yaml, a server with a work pool), each generation without overlap is a flow run of the
`evolve-generation/generation` deployment that any worker runs, so that Prefect can retry a failed one on its own;
elsewhere the generations are subflows, and only the whole evolution is rerun (README.md). When a generation may
start and with how many children is ksci.schedule's loop; this module gives it the launcher.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from contextvars import copy_context
from dataclasses import asdict

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.deployments import run_deployment
from prefect.exceptions import TerminationSignal
from prefect.futures import wait
from prefect.runtime import flow_run
from prefect.states import Scheduled
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_generation
from ksci.console.events import observer
from ksci.devices import GPU_PRIORITY
from ksci.evaluate.run.harness_process import SPARES
from ksci.evaluate.run.isolate import stop_children
from ksci.lineage.identity import refusal_to_run
from ksci.lineage.store import LineageStore
from ksci.llm.config import LlmConfig
from ksci.proposers.choice import llm_for, proposer_for
from ksci.proposers.overlap import horizon, open_board, post
from ksci.proposers.protocol import GenerationContext, Proposer
from ksci.report.generation_summary import artifact_key
from ksci.run import DEFAULT_STORE, RunSpec, progress_line
from ksci.schedule import Hooks, ready, run_generations
from tasks.evaluation import CandidateChain, start_spare_harnesses
from tasks.profile import profile_best
from tasks.proposing import read_population
from tasks.steps import generation_steps

__all__ = ["DEFAULT_STORE", "evolve", "evolve_generation"]
GENERATION_POLL_S = 2.0  # how often a deployed evolution looks whether its generation's flow run has ended
UNCLAIMED_WARNING_S = 300.0  # a generation's flow run that no worker has taken this long gets a warning
SUBFLOWS_RERUN = (
    "evolution %s stopped at a failed generation. Its generations ran inside this flow run (subflows: no "
    "deployment, so no Retry button of their own, and `prefect flow-run retry` refuses them). Rerun the "
    "evolution: `ksci evolve --run %s` with the same arguments, or, if this flow run is a deployment's, Retry on "
    "its page. What finished is taken from the cache, and no lineage row is written twice."
)


class GenerationRunFailed(RuntimeError):
    """A generation's flow run, run by a worker, ended failed, crashed or cancelled."""


# Threads mostly wait (on subprocesses, on upstream futures, on the GPU), so there are many of them; the compiler
# processes they start are what uses the CPU cores.
@flow(name="evolve-generation", task_runner=ThreadPoolTaskRunner(max_workers=64))
def evolve_generation(spec: RunSpec, generation: int, llm: LlmConfig | None = None) -> dict:
    """One generation. A subflow of `evolve` in its process, or, in a deployed evolution, a flow run of the
    `evolve-generation/generation` deployment that a worker runs (and a Retry of it runs again): that one sets up
    its host (spare harnesses) itself and reads the worker's LLM configuration (spec.llm_config)."""
    own_run = _is_a_deployment_run()
    proposer = proposer_for(spec, llm_for(spec, llm) if own_run else llm)
    with gpu_host(spec) if own_run else nullcontext():
        try:
            return _generation(spec, generation, proposer)
        except (KeyboardInterrupt, SystemExit, TerminationSignal):
            # Stopped (Ctrl-C, SIGTERM): its harness children are killed now, not after the task runner has
            # waited for them (leaving this subflow waits for its running tasks).
            stop_children()
            raise


def _generation(spec: RunSpec, generation: int, proposer: Proposer) -> dict:
    logger = get_run_logger()
    population = read_population(spec.store_root, spec.run, horizon(generation, spec.overlap))
    GPU_PRIORITY.set(generation)  # with overlapping generations, the older ones' candidates take a free GPU first
    context = GenerationContext(spec, generation, population)
    steps = generation_steps(spec, generation, logger, population)
    proposed = proposer.propose(context, steps)
    if proposed.failure is not None:
        raise RuntimeError(proposed.failure.message)  # fails the generation, to be rerun
    wait([chain.recorded for chain in proposed.chains])  # every candidate is recorded before one's failure counts
    rows, counts = _outcomes(proposed.chains)
    if rows:
        proposer.conclude(context, rows, steps)
    summary = {"run": spec.run, "generation": generation, "candidates": len(rows), **counts, "note": proposed.note}
    logger.info("generation %d done: %s", generation, summary)
    publish_generation(spec.run, generation, rows, spec.store_root)
    return {**summary, "rows": rows}


def _outcomes(chains: list[CandidateChain]) -> tuple[list[dict], dict]:
    """The recorded rows and what came from the cache; raises the first failed stage's own exception (the
    generation fails, to be rerun) once every chain has ended."""
    rows, failed = [], []
    counts = {"compiled": 0, "compile_cache_hits": 0, "benchmarked": 0, "benchmark_cache_hits": 0}
    for chain in chains:
        if not chain.recorded.state.is_completed():
            # the stage that failed (storing the source, on a full disk, fails the record after it unrun)
            failed.append(next((f for f in chain if f is not None and f.state.is_failed()), chain.recorded))
            continue
        rows.append(chain.recorded.result())
        cached = chain.compiled.state.name == "Cached"
        counts["compile_cache_hits" if cached else "compiled"] += 1
        if rows[-1]["status"] != "compile_error":
            cached = chain.evaluated.state.name == "Cached"
            counts["benchmark_cache_hits" if cached else "benchmarked"] += 1
    if failed:
        failed[0].result()
    return rows, counts


def _is_a_deployment_run() -> bool:
    """Whether this flow run is a deployment's (run by a worker), not a subflow (which has no deployment)."""
    context = FlowRunContext.get()
    return context is not None and context.flow_run is not None and context.flow_run.deployment_id is not None


@contextmanager
def gpu_host(spec: RunSpec):
    """What a process that runs candidates sets up first: spare harness processes, started while generation 0
    proposes and compiles and closed when the block ends."""
    try:
        start_spare_harnesses(spec.evaluation())
        yield
    finally:
        SPARES.close()


@flow(name="evolve", log_prints=True)
def evolve(
    problem: str = "fp8_gemm",
    target: str = "cuda",
    generations: int = 5,
    run: str | None = None,
    children: int = 6,
    strategy: str = "elitist",
    seed: int = 0,
    store_root: str = DEFAULT_STORE,
    arch: str | None = None,
    gpus: list[str] | None = None,
    simulate: str | None = None,
    proposer: str = "tuning",
    llm: LlmConfig | None = None,
    llm_config: str | None = None,
    overlap: int = 0,
    generation_deployment: str | None = None,
    profile: bool = True,
    race: bool = True,
    max_candidates: int | None = None,
    time_limit_s: float | None = None,
) -> list[dict]:
    """Run (or continue) an evolution. Generations already done replay from the cache.

    The parameters are ksci.run.RunSpec's fields, flat (with RunLimits' max_candidates and time_limit_s), because
    they are what a deployment's parameters and the Prefect UI's form set one by one (`-p generations=3`,
    prefect.yaml); the flow makes its RunSpec of them at once (tests/test_run.py keeps the two in step). `llm`: the
    LLM configuration object, passed by `ksci evolve` in its process; a deployment, which cannot pass it, leaves it
    out and the worker's own configuration is read (llm_config, else KSCI_LLM_CONFIG or ./ksci.toml, and the
    KSCI_LLM_* / OPENAI_* variables). See RunSpec for what each setting does."""
    parameters = {name: value for name, value in locals().items() if name != "llm"}
    return run_evolution(RunSpec.from_parameters(parameters), llm)


def run_evolution(spec: RunSpec, llm: LlmConfig | None = None) -> list[dict]:
    """The evolve flow's body: the generations, one after the other (here or on the pool's workers) or side by
    side; a summary of each as it ends. An LLM run stops cleanly before a generation once its budget is spent, any
    run once its limits are reached (ksci.run)."""
    if _is_a_deployment_run() and (refusal := refusal_to_run(spec.store_root, spec.run, spec.identity())):
        raise ValueError(refusal)  # what `ksci evolve` refuses before Prefect starts, for a deployment's run
    llm = llm_for(spec, llm)
    proposer = proposer_for(spec, llm)
    if spec.generation_deployment is not None and spec.overlap:
        print(
            f"overlap {spec.overlap}: the generations run side by side in this flow run's process (subflows, which "
            "have no Retry of their own): to rerun a failed one, retry this flow run"
        )
    progress = create_progress_artifact(
        0.0, key=artifact_key(f"{spec.run}-progress"), description=f"evolution {spec.run}"
    )
    summaries: list[dict] = []

    def finished(summary: dict) -> None:
        summaries.append(summary)
        update_progress_artifact(progress, 100.0 * len(summaries) / spec.generations)
        print(progress_line(summaries, spec.generations))  # to the logs (log_prints); the terminal's is the observer's
        observer().generation_finished(summary)

    try:
        if spec.on_workers:  # the worker's LLM configuration, not this process's object (it may hold a key)
            launch = lambda work, g: ready(_generation_on_a_worker(work, g))  # noqa: E731
            run_generations(spec, launch, _hooks(finished), proposer.stop_reason)
        else:
            with gpu_host(spec):
                _in_this_process(spec, proposer, llm, _hooks(finished))
    except Exception:
        if not spec.on_workers:  # a deployed one's error says what to retry (_generation_on_a_worker)
            get_run_logger().error(SUBFLOWS_RERUN, spec.run, spec.run)
        raise
    if spec.profile:
        _profile_the_best(spec)
    return summaries


def _profile_the_best(spec: RunSpec) -> None:
    """The run's best kernel, profiled once at the end (tasks/profile.py, on the GPU lock; recorded for the report):
    a failed profile is its digest "no profile: why", never the run's failure."""
    digest = profile_best(spec.evaluation(), spec.run)
    if digest is not None:
        print(f"the best kernel's profile: {digest.splitlines()[0]}")


def _in_this_process(spec: RunSpec, proposer: Proposer, llm: LlmConfig | None, hooks: Hooks) -> None:
    """The generations as subflows of this flow run: side by side in threads with overlap, else one after the
    other in this thread.

    Side by side, they are subflows called from threads (with this flow's context, as Prefect's own task runner
    does), not tasks: a generation called inside a task would run in that task's transaction, and a failed
    generation would then take its finished stages' cache records down with it. Leaving the pool's block, by an
    error too, waits for every generation still running, so those record what they did before the error ends the run."""
    if not spec.overlap:
        run_generations(spec, lambda work, g: ready(evolve_generation(work, g, llm)), hooks, proposer.stop_reason)
        return
    with open_board(spec.store_root, spec.run):
        with ThreadPoolExecutor(max_workers=spec.overlap + 1, thread_name_prefix="generation") as pool:

            def launch(work: RunSpec, generation: int):
                return pool.submit(copy_context().run, _overlapping, work, generation, llm).result

            run_generations(spec, launch, hooks, proposer.stop_reason)


def _hooks(finished) -> Hooks:
    def stopped(message: str) -> None:
        print(message)
        observer().stopped_early(message)

    return Hooks(
        started=lambda g, children: observer().generation_started(g, children), finished=finished, stopped=stopped
    )


def _overlapping(spec: RunSpec, generation: int, llm: LlmConfig | None) -> dict:
    """One generation of an overlapping run: a subflow of evolve, in a thread of its own."""
    try:
        return evolve_generation(spec, generation, llm)
    except BaseException as exc:  # one that failed before proposing must not leave the generations after it waiting
        post(spec.store_root, spec.run, generation, exc)
        raise


def _generation_on_a_worker(spec: RunSpec, generation: int) -> dict:
    """One generation as a flow run of the generation deployment, which any worker of its pool runs; waits for it.

    Its idempotency key ties it to this evolve flow run: a retry of this flow run finds the generations it started
    before, takes a completed one as it is and retries a failed one (the same flow run, as its Retry button does),
    so that a generation has one flow run per evolution however often either is retried."""
    child = run_deployment(
        spec.generation_deployment,
        parameters={"spec": asdict(spec), "generation": generation},  # JSON: no LlmConfig object
        flow_run_name=f"{spec.run}-gen-{generation}",
        idempotency_key=f"{flow_run.get_id()}-generation-{generation}",
        timeout=0,
    )
    with get_client(sync_client=True) as client:
        if child.state.is_final() and not child.state.is_completed():
            client.set_flow_run_state(child.id, Scheduled(message="retried with its evolve flow run"), force=True)
            print(f"generation {generation}: retrying its flow run {child.name} ({child.id})")
        child = _until_final(client, child, generation)
    if not child.state.is_completed():
        raise GenerationRunFailed(
            f"generation {generation} of {spec.run} ended {child.state.name}: flow run {child.name} ({child.id}). "
            f"Retry it on its page in the UI (or `prefect flow-run retry {child.id}`), then retry this flow run to "
            "go on (its finished generations are not run again)"
        )
    rows = LineageStore(spec.store_root).read(spec.run)
    rows = rows[rows["generation"] == generation].to_dict("records")
    return {"run": spec.run, "generation": generation, "candidates": len(rows), "flow_run": child.name, "rows": rows}


def _until_final(client, child, generation: int):
    """Poll a generation's flow run until it ends; warn once if no worker takes it for long."""
    waiting_since = time.monotonic()
    while not (child := client.read_flow_run(child.id)).state.is_final():
        if child.state.is_scheduled() and time.monotonic() - waiting_since > UNCLAIMED_WARNING_S:
            waiting_since = float("inf")  # said once
            get_run_logger().warning(
                "generation %d: its flow run %s has waited %.0f s for a worker of its pool. Is one running, "
                "with a free slot? A worker's --limit counts this evolve flow run too (docs/deployment.md)",
                generation,
                child.name,
                UNCLAIMED_WARNING_S,
            )
        time.sleep(GENERATION_POLL_S)
    return child
