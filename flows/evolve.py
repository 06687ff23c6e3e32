"""The evolution as Prefect flows: `evolve` runs generations; `evolve_generation` is the unit that fails and is rerun.

A generation: read the population, select parents, hypothesize children, render, hipify, compile (in parallel on
the CPU cores), verify and benchmark (one at a time per GPU), and record each candidate as soon as it is done.
Every stage's result is cached by its inputs, and proposals are a deterministic function of the generations
before, so a rerun of a failed or killed generation reuses what had finished and records no row twice.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.futures import wait
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import generation_markdown, generation_table
from ksci import PROJECT_ROOT
from ksci.problem import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT
from tasks.gpu import ensure_gpu_limit
from tasks.stages import (
    benchmark_kernel,
    compile_kernel,
    hipify,
    hypothesize,
    read_population,
    record_candidate,
    render,
    select,
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
) -> dict:
    logger = get_run_logger()
    dialect = DIALECT_OF_TARGET[target]
    turn_seed = seed * 100_003 + generation
    population = read_population(store_root, run, generation)
    selections = select(strategy, population, children, turn_seed)
    proposals = hypothesize(problem, dialect, population, selections, children, turn_seed)
    proposer = "seed" if population.empty else "tuning"
    logger.info("generation %d: %d proposals from %s", generation, len(proposals), proposer)

    gpus = gpus or ["0"]
    pending = []
    for proposal in proposals:
        rendered = render.submit(problem, dialect, proposal.template, proposal.params)
        prepared = hipify.submit(problem, rendered, target)
        compiled = compile_kernel.submit(prepared, target, arch, simulate)
        verified = verify_kernel.submit(problem, prepared, compiled, target, gpus, simulate)
        benched = benchmark_kernel.submit(problem, prepared, compiled, verified, target, gpus, simulate)
        source_path = store_source.submit(store_root, prepared, SUFFIX_OF_DIALECT[dialect])
        meta = {
            "run": run,
            "generation": generation,
            "proposer": proposer,
            "parent_id": proposal.parent_id,
            "reference_id": proposal.reference_id,
            "hypothesis": proposal.hypothesis,
            "template": proposal.template,
            "params": proposal.params,
        }
        recorded = record_candidate.submit(store_root, meta, prepared, source_path, benched)
        pending.append((compiled, verified, benched, recorded))

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
    summary = {"run": run, "generation": generation, "candidates": len(rows), **counts}
    logger.info("generation %d done: %s", generation, summary)
    key = _artifact_key(f"{run}-gen-{generation}")
    generation_table(key, rows)
    create_markdown_artifact(generation_markdown(run, generation, rows, store_root), key=f"{key}-summary")
    return {**summary, "rows": rows}


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
) -> list[dict]:
    """Run (or continue) an evolution. Generations already done replay from the cache."""
    run = run or f"{problem}-{target}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    gpus = gpus or ["0"]
    for gpu in gpus:
        ensure_gpu_limit(gpu)
    progress = create_progress_artifact(0.0, key=_artifact_key(f"{run}-progress"), description=f"evolution {run}")
    summaries = []
    for generation in range(generations):
        summaries.append(
            evolve_generation(
                problem, target, run, generation, children, strategy, seed, store_root, arch, gpus, simulate
            )
        )
        update_progress_artifact(progress, 100.0 * (generation + 1) / generations)
        print(_progress_line(summaries, generations))
    return summaries


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
