"""The evolution as Prefect flows: `evolve` runs generations; `evolve_generation` is the unit that fails and is rerun.

A generation: read the population, select parents, hypothesize children, render, hipify, compile (in parallel on
the CPU cores), verify and benchmark (one at a time per GPU), and record each candidate as soon as it is done.
With the LLM proposer, the selector, experiment designer and kernel writer replace select, hypothesize and render
(flows/llm_generation.py), and a findings call closes the generation.
Every stage's result is cached by its inputs, and proposals are a deterministic function of the generations
before, so a rerun of a failed or killed generation reuses what had finished and records no row twice.
With `overlap` k > 0 (tuning proposer), generations run side by side: generation g learns from the generations
before max(0, g - k) (so generations 1 to k seed the run with generation 0) and starts while the k before it are
still on the GPUs (flows/pipeline.py), so that several GPUs are not left waiting at each generation's start and end.
Deployed (prefect.yaml, a server with a work pool), each generation without overlap is a flow run of the
`evolve-generation/generation` deployment that any worker runs, so that Prefect can retry a failed one on its own;
elsewhere the generations are subflows, and only the whole evolution is rerun (README.md).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from contextvars import copy_context
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.deployments import run_deployment
from prefect.futures import wait
from prefect.runtime import flow_run
from prefect.states import Scheduled
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import generation_markdown, generation_table
from flows.llm_generation import distil_findings, llm_candidates
from flows.pipeline import OVERLAP_RULE, board_of, horizon, open_board, overlap_allowed
from ksci import PROJECT_ROOT
from ksci.devices import GPU_PRIORITY
from ksci.evaluate.pipeline import SPARES
from ksci.lineage.store import LineageStore
from ksci.llm.config import LlmConfig, LlmConfigError, load_config
from ksci.llm.ledger import LlmLedger
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, load_problem
from ksci.proposers.tuning import space_note
from ksci.run import RunLimits
from tasks.compose import compose
from tasks.stages import (
    benchmark_kernel,
    compile_kernel,
    hipify,
    hypothesize,
    read_population,
    record_candidate,
    render,
    select,
    start_spare_harnesses,
    store_source,
    verify_kernel,
)

DEFAULT_STORE = str(PROJECT_ROOT / "data" / "runs")
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


# Threads mostly wait (on subprocesses, on upstream futures, on the GPU slot), so there are many of them;
# the compiler processes they start are what uses the CPU cores.
@flow(name="evolve-generation", task_runner=ThreadPoolTaskRunner(max_workers=64))
def evolve_generation(
    problem: str,
    target: str,
    run: str,
    generation: int,
    children: int = 6,
    strategy: str = "elitist",
    seed: int = 0,
    store_root: str = DEFAULT_STORE,
    arch: str | None = None,
    gpus: list[str] | None = None,
    simulate: str | None = None,
    proposer: str = "tuning",
    llm: LlmConfig | None = None,
    overlap: int = 0,
    llm_config: str | None = None,
) -> dict:
    """One generation. A subflow of `evolve` in its process, or, in a deployed evolution, a flow run of the
    `evolve-generation/generation` deployment that a worker runs (and a Retry of it runs again): that one sets up
    its host's GPUs itself and reads the worker's LLM configuration (`llm_config`, as `evolve` does)."""
    gpus = gpus or ["0"]
    own_run = _is_a_deployment_run()
    if own_run and proposer == "llm" and llm is None:
        llm = configured_llm(llm_config)
    with gpu_host(problem, target, gpus, simulate) if own_run else nullcontext():
        return _generation(
            problem,
            target,
            run,
            generation,
            children,
            strategy,
            seed,
            store_root,
            arch,
            gpus,
            simulate,
            proposer,
            llm,
            overlap,
        )


def _generation(
    problem, target, run, generation, children, strategy, seed, store_root, arch, gpus, simulate, proposer, llm, overlap
) -> dict:
    logger = get_run_logger()
    dialect = DIALECT_OF_TARGET[target]
    turn_seed = seed * 100_003 + generation
    learns_from = horizon(generation, overlap)
    population = read_population(store_root, run, learns_from)
    GPU_PRIORITY.set(generation)  # with overlapping generations, the older ones' candidates take a free GPU first

    def evaluate(source, meta: dict) -> tuple:
        """Submit one source's chain: hipify, compile, verify, benchmark, store, record."""
        prepared = hipify.submit(problem, source, target)
        compiled = compile_kernel.submit(prepared, target, arch, simulate)
        verified = verify_kernel.submit(problem, prepared, compiled, target, gpus, simulate)
        benched = benchmark_kernel.submit(problem, prepared, compiled, verified, target, gpus, simulate)
        source_path = store_source.submit(store_root, prepared, SUFFIX_OF_DIALECT[dialect])
        recorded = record_candidate.submit(store_root, meta, prepared, source_path, benched)
        return compiled, verified, benched, recorded

    note = ""
    if proposer == "llm" and (not population.empty or not load_problem(problem).templates_for(dialect)):
        if llm is None:
            raise ValueError("the llm proposer needs an LLM configuration")
        pending, note = llm_candidates(
            problem, target, run, generation, population, llm, evaluate, strategy, turn_seed, store_root, children
        )
        logger.info("generation %d: %d candidates from the LLM%s", generation, len(pending), f" ({note})" * bool(note))
    else:
        proposals = _propose(
            problem,
            dialect,
            run,
            generation,
            population,
            learns_from,
            overlap,
            strategy,
            children,
            turn_seed,
            store_root,
        )
        proposer = "seed" if population.empty else "tuning"
        note = _space_note(problem, dialect, store_root, run, generation, population, proposals, overlap)
        logger.info(
            "generation %d: %d proposals from %s%s", generation, len(proposals), proposer, f" ({note})" * bool(note)
        )
        pending = []
        for proposal in proposals:
            if proposal.by_shape:  # a composition of points by shape (ksci.problem.compose)
                rendered = compose.submit(problem, dialect, proposal.by_shape)
            else:
                rendered = render.submit(problem, dialect, proposal.template, proposal.params)
            meta = {
                "run": run,
                "generation": generation,
                "proposer": proposer,
                "parent_id": proposal.parent_id,
                "reference_id": proposal.reference_id,
                "hypothesis": proposal.hypothesis,
                "template": proposal.template,
                "params": proposal.params,
                "params_by_shape": proposal.by_shape,
            }
            pending.append(evaluate(rendered, meta))

    # Let every candidate finish and be recorded before a failure of one of them fails the generation.
    wait([recorded for *_, recorded in pending])
    rows, failed = [], []
    counts = {"compiled": 0, "compile_cache_hits": 0, "benchmarked": 0, "benchmark_cache_hits": 0}
    for chain in pending:
        compiled, _verified, benched, recorded = chain
        if not recorded.state.is_completed():
            failed.append(next(f for f in chain if f.state.is_failed()))
            continue
        rows.append(recorded.result())
        _count(counts, "compile", compiled.state.name)
        if rows[-1]["status"] != "compile_error":
            _count(counts, "benchmark", benched.state.name)
    if failed:
        failed[0].result()  # raises the stage's own exception: the generation fails, to be rerun
    if proposer == "llm" and llm is not None and rows:
        distil_findings(problem, target, run, generation, rows, population, llm, store_root)
    summary = {"run": run, "generation": generation, "candidates": len(rows), **counts, "note": note}
    logger.info("generation %d done: %s", generation, summary)
    key = _artifact_key(f"{run}-gen-{generation}")
    generation_table(key, rows)
    create_markdown_artifact(generation_markdown(run, generation, rows, store_root), key=f"{key}-summary")
    return {**summary, "rows": rows}


def _propose(problem, dialect, run, generation, population, learns_from, overlap, strategy, children, seed, store_root):
    """Select and hypothesize; in an overlapping run, avoid what the generations still running proposed and hand
    this generation's proposals on to the ones after it (flows/pipeline.py)."""
    board = board_of(store_root, run) if overlap else None
    in_flight = [p for earlier in range(learns_from, generation) for p in board.proposals(earlier)] if board else []
    selections = select(strategy, population, children, seed)
    proposals = hypothesize(problem, dialect, population, selections, children, seed, in_flight or None)
    if board:  # a failure before this point reaches the board through _run_overlapping
        board.post(generation, proposals)
    return proposals


def _space_note(problem, dialect, store_root, run, generation, population, proposals, overlap) -> str:
    """Which template families have no untried feasible point left (ksci.proposers.tuning.space_note)."""
    in_flight = []
    if overlap:
        board = board_of(store_root, run)
        in_flight = [p for earlier in range(horizon(generation, overlap), generation) for p in board.proposals(earlier)]
    return space_note(load_problem(problem), dialect, population, list(proposals) + in_flight)


def _run_overlapping(arguments: dict) -> dict:
    """One generation of an overlapping run: a subflow of evolve, in a thread of its own."""
    try:
        return evolve_generation(**arguments)
    except BaseException as exc:  # one that failed before proposing must not leave the generations after it waiting
        board_of(arguments["store_root"], arguments["run"]).post(arguments["generation"], exc)
        raise


def _is_a_deployment_run() -> bool:
    """Whether this flow run is a deployment's (run by a worker), not a subflow (which has no deployment)."""
    context = FlowRunContext.get()
    return context is not None and context.flow_run is not None and context.flow_run.deployment_id is not None


def _count(counts: dict, stage: str, state_name: str) -> None:
    if state_name == "Cached":
        counts[f"{stage}_cache_hits"] += 1
    elif stage == "compile":
        counts["compiled"] += 1
    else:
        counts["benchmarked"] += 1


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
    max_candidates: int | None = None,
    time_limit_s: float | None = None,
) -> list[dict]:
    """Run (or continue) an evolution. Generations already done replay from the cache.

    proposer: "tuning" (Optuna over the seed templates) or "llm" (the LLM scientist, configured by `llm`; a
    deployment, which cannot pass that object, leaves it out and the flow reads the worker's configuration: the
    TOML file `llm_config`, else KSCI_LLM_CONFIG or ./ksci.toml, and the KSCI_LLM_* / OPENAI_* variables).
    An LLM run stops cleanly before a generation once its token or money budget is spent.
    overlap: how many generations a new one may overlap (tuning proposer only; flows/pipeline.py). 0 keeps them
    strictly one after the other; 1 keeps several GPUs busy across generation boundaries.
    generation_deployment: on a Prefect server with a work pool (prefect.yaml sets it), run each generation as a flow
    run of this deployment of `evolve-generation`, on any worker of the pool, so that a failed generation can be
    retried on its own (Retry on its page; README.md). Without it (the embedded default), or with overlap, the
    generations are subflows in this flow's process, and only the whole evolution can be rerun.
    max_candidates, time_limit_s: stop cleanly before a generation once the run holds that many candidates (the
    generation that reaches the cap gets only the candidates left) or once this call has run that long
    (ksci.run); `generations` stays the most there will be."""
    limits = RunLimits(max_candidates, time_limit_s)
    if proposer not in ("tuning", "llm"):
        raise ValueError(f"proposer {proposer!r}: expected 'tuning' or 'llm'")
    if not overlap_allowed(overlap, proposer):
        raise ValueError(f"overlap {overlap}: expected {OVERLAP_RULE}")
    if proposer == "llm" and llm is None:
        llm = configured_llm(llm_config)
    run = run or new_run_name(problem, target)
    gpus = gpus or ["0"]
    on_workers = generation_deployment is not None and not overlap
    if generation_deployment is not None and overlap:
        print(
            f"overlap {overlap}: the generations run side by side in this flow run's process (subflows, which have "
            "no Retry of their own): to rerun a failed one, retry this flow run"
        )
    progress = create_progress_artifact(0.0, key=_artifact_key(f"{run}-progress"), description=f"evolution {run}")
    summaries: list[dict] = []

    def finished(summary: dict) -> None:
        summaries.append(summary)
        update_progress_artifact(progress, 100.0 * len(summaries) / generations)
        print(_progress_line(summaries, generations))

    arguments = dict(
        problem=problem,
        target=target,
        run=run,
        children=children,
        strategy=strategy,
        seed=seed,
        store_root=store_root,
        arch=arch,
        gpus=gpus,
        simulate=simulate,
        proposer=proposer,
        llm=llm,
    )
    try:
        _generations(
            generations,
            overlap,
            arguments,
            finished,
            generation_deployment if on_workers else None,
            llm_config,
            limits,
        )
    except Exception:
        if not on_workers:  # a deployed one's error says what to retry (_generation_on_a_worker)
            get_run_logger().error(SUBFLOWS_RERUN, run, run)
        raise
    return summaries


def _generations(
    generations, overlap, arguments, finished, deployment: str | None, llm_config: str | None, limits: RunLimits
) -> None:
    """Run the generations: as subflows in this process (set up for its GPUs), or each as a flow run of
    `deployment` (which sets up the GPUs of whichever host runs it)."""
    run, store_root, llm = arguments["run"], arguments["store_root"], arguments["llm"]
    host = arguments["problem"], arguments["target"], arguments["gpus"], arguments["simulate"]
    started = time.monotonic()
    with nullcontext() if deployment else gpu_host(*host):
        if overlap:
            with open_board(store_root, run):
                _side_by_side(generations, overlap, arguments, finished, limits, started)
            return
        for generation in range(generations):
            candidates = _candidates_before(limits, store_root, run, generation)
            stop = _budget_spent(store_root, run, llm) if arguments["proposer"] == "llm" else None
            stop = stop or limits.stop_reason(generation, candidates, time.monotonic() - started)
            if stop:
                print(f"evolution {run} stops before generation {generation}: {stop}")
                return
            work = {
                **arguments,
                "generation": generation,
                "children": limits.children(arguments["children"], candidates),
            }
            if deployment:  # the worker's LLM configuration, not this process's object (it may hold a key)
                finished(_generation_on_a_worker(deployment, {**work, "llm": None, "llm_config": llm_config}))
            else:
                finished(evolve_generation(**work))


def _candidates_before(
    limits: RunLimits, store_root: str, run: str, generation: int, running: dict[int, int] | None = None
) -> int:
    """What counts against the candidate cap before `generation` starts: the candidates recorded in the generations
    before it, those still `running` counted by the children given to them instead (0 when there is no cap: the
    lineage is not read). Counted by generation, so that a rerun that replays later generations from the cache
    counts as the first run did."""
    if not limits.max_candidates:
        return 0
    running = running or {}
    rows = LineageStore(store_root).read(run)
    recorded = (rows["generation"] < generation) & ~rows["generation"].isin(list(running))
    return int(recorded.sum()) + sum(running.values())


@contextmanager
def gpu_host(problem: str, target: str, gpus: list[str], simulate: str | None):
    """What a process that runs candidates sets up first: spare harness processes, started while generation 0
    proposes and compiles and closed when the block ends."""
    try:
        start_spare_harnesses(problem, target, gpus, simulate)
        yield
    finally:
        SPARES.close()


def _generation_on_a_worker(deployment: str, arguments: dict) -> dict:
    """One generation as a flow run of `deployment`, which any worker of its pool runs; waits for it to end.

    Its idempotency key ties it to this evolve flow run: a retry of this flow run finds the generations it started
    before, takes a completed one as it is and retries a failed one (the same flow run, as its Retry button does),
    so that a generation has one flow run per evolution however often either is retried."""
    run, generation = arguments["run"], arguments["generation"]
    child = run_deployment(
        deployment,
        parameters=arguments,
        flow_run_name=f"{run}-gen-{generation}",
        idempotency_key=f"{flow_run.get_id()}-generation-{generation}",
        timeout=0,
    )
    with get_client(sync_client=True) as client:
        if child.state.is_final() and not child.state.is_completed():
            client.set_flow_run_state(child.id, Scheduled(message="retried with its evolve flow run"), force=True)
            print(f"generation {generation}: retrying its flow run {child.name} ({child.id})")
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
    if not child.state.is_completed():
        raise GenerationRunFailed(
            f"generation {generation} of {run} ended {child.state.name}: flow run {child.name} ({child.id}). Retry it "
            f"on its page in the UI (or `prefect flow-run retry {child.id}`), then retry this flow run to go on "
            "(its finished generations are not run again)"
        )
    rows = LineageStore(arguments["store_root"]).read(run)
    rows = rows[rows["generation"] == generation].to_dict("records")
    return {"run": run, "generation": generation, "candidates": len(rows), "flow_run": child.name, "rows": rows}


def _side_by_side(generations: int, overlap: int, arguments: dict, finished, limits: RunLimits, started: float) -> None:
    """Start each generation as soon as the generations it learns from are done. When one fails, those already
    running still finish (and record what they did) before its error ends the run.

    The generations are subflows called from threads (with this flow's context, as Prefect's own task runner
    does), not tasks: a generation called inside a task would run in that task's transaction, and a failed
    generation would then take its finished stages' cache records down with it."""
    running: dict[int, Future] = {}
    # Leaving the pool's block, by an error too, waits for every generation still running.
    with ThreadPoolExecutor(max_workers=overlap + 1, thread_name_prefix="generation") as pool:
        given: dict[int, int] = {}  # children given to each generation still running
        for generation in range(generations):
            for done in sorted(g for g in running if g < horizon(generation, overlap)):
                finished(running.pop(done).result())
                given.pop(done)
            candidates = _candidates_before(limits, arguments["store_root"], arguments["run"], generation, given)
            stop = limits.stop_reason(generation, candidates, time.monotonic() - started)
            if stop:
                print(f"evolution {arguments['run']} stops before generation {generation}: {stop}")
                break
            given[generation] = limits.children(arguments["children"], candidates)
            work = {**arguments, "generation": generation, "overlap": overlap, "children": given[generation]}
            running[generation] = pool.submit(copy_context().run, _run_overlapping, work)
        for done in sorted(running):
            finished(running.pop(done).result())


def configured_llm(path: str | None) -> LlmConfig:
    """The LLM configuration of this machine, or a clear error before anything runs."""
    llm = load_config(path)
    if not llm.configured:
        raise LlmConfigError(
            "the llm proposer needs an endpoint on this worker: set KSCI_LLM_BASE_URL (or OPENAI_BASE_URL) or "
            "KSCI_LLM_API_KEY / OPENAI_API_KEY in the worker's environment, or pass llm_config (a ksci.toml path)"
        )
    llm.require_models()
    return llm


def new_run_name(problem: str, target: str) -> str:
    return f"{problem}-{target}-{datetime.now(UTC):%Y%m%d-%H%M%S}"


def _budget_spent(store_root: str, run: str, llm: LlmConfig | None) -> str | None:
    if llm is None:
        return None
    return llm.budget.exceeded(*LlmLedger(store_root).spent(run))


def _progress_line(summaries: list[dict], generations: int, width: int = 30) -> str:
    """A text progress bar with the best geomean so far, printed after each generation."""
    done = len(summaries)
    bar = "#" * round(width * done / generations) + "-" * (width - round(width * done / generations))
    times = [r["geomean_us"] for s in summaries for r in s["rows"] if r["status"] == "ok" and r.get("geomean_us")]
    best = f"best so far {min(times):.2f} us" if times else "nothing has passed yet"
    return f"[{bar}] generation {done}/{generations}: {best}"


def _artifact_key(text: str) -> str:
    """Artifact keys allow lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
