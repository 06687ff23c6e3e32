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
"""

from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.futures import wait
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import generation_markdown, generation_table
from flows.llm_generation import distil_findings, llm_candidates
from flows.pipeline import OVERLAP_RULE, board_of, horizon, open_board, overlap_allowed
from ksci import PROJECT_ROOT
from ksci.evaluate import SPARES
from ksci.llm.config import LlmConfig, LlmConfigError, load_config
from ksci.llm.ledger import LlmLedger
from ksci.problem import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, load_problem
from ksci.propose import space_note
from tasks.compose import compose
from tasks.gpu import GPU_PRIORITY, ensure_gpu_limit
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
) -> dict:
    logger = get_run_logger()
    dialect = DIALECT_OF_TARGET[target]
    turn_seed = seed * 100_003 + generation
    learns_from = horizon(generation, overlap)
    population = read_population(store_root, run, learns_from)
    gpus = gpus or ["0"]
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
    if proposer == "llm" and not population.empty:
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
            if proposal.by_shape:  # a composition of points by shape (ksci.compose)
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
    """Which template families have no untried feasible point left (ksci.propose.space_note)."""
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
) -> list[dict]:
    """Run (or continue) an evolution. Generations already done replay from the cache.

    proposer: "tuning" (Optuna over the seed templates) or "llm" (the LLM scientist, configured by `llm`; a
    deployment, which cannot pass that object, leaves it out and the flow reads the worker's configuration: the
    TOML file `llm_config`, else KSCI_LLM_CONFIG or ./ksci.toml, and the KSCI_LLM_* / OPENAI_* variables).
    An LLM run stops cleanly before a generation once its token or money budget is spent.
    overlap: how many generations a new one may overlap (tuning proposer only; flows/pipeline.py). 0 keeps them
    strictly one after the other; 1 keeps several GPUs busy across generation boundaries."""
    if proposer not in ("tuning", "llm"):
        raise ValueError(f"proposer {proposer!r}: expected 'tuning' or 'llm'")
    if not overlap_allowed(overlap, proposer):
        raise ValueError(f"overlap {overlap}: expected {OVERLAP_RULE}")
    if proposer == "llm" and llm is None:
        llm = configured_llm(llm_config)
    run = run or new_run_name(problem, target)
    gpus = gpus or ["0"]
    for gpu in gpus:
        ensure_gpu_limit(gpu)
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
        start_spare_harnesses(problem, target, gpus, simulate)  # while generation 0 proposes and compiles
        if overlap:
            with open_board(store_root, run):
                _side_by_side(generations, overlap, arguments, finished)
            return summaries
        for generation in range(generations):
            stop = _budget_spent(store_root, run, llm) if proposer == "llm" else None
            if stop:
                print(f"evolution {run} stops before generation {generation}: {stop}")
                break
            finished(evolve_generation(generation=generation, **arguments))
        return summaries
    finally:
        SPARES.close()  # the harness processes started ahead for this run's GPU tasks, not needed any more


def _side_by_side(generations: int, overlap: int, arguments: dict, finished) -> None:
    """Start each generation as soon as the generations it learns from are done. When one fails, those already
    running still finish (and record what they did) before its error ends the run.

    The generations are subflows called from threads (with this flow's context, as Prefect's own task runner
    does), not tasks: a generation called inside a task would run in that task's transaction, and a failed
    generation would then take its finished stages' cache records down with it."""
    running: dict[int, Future] = {}
    # Leaving the pool's block, by an error too, waits for every generation still running.
    with ThreadPoolExecutor(max_workers=overlap + 1, thread_name_prefix="generation") as pool:
        for generation in range(generations):
            for done in sorted(g for g in running if g < horizon(generation, overlap)):
                finished(running.pop(done).result())
            work = {**arguments, "generation": generation, "overlap": overlap}
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
