"""One generation of the LLM kernel scientist, run inside the evolve-generation flow (flows/evolve.py):

    select (LLM, falls back to a rule) -> design (10 avenues, 5 plans, 3 kept) -> for each kept plan: write ->
    render into the harness template -> hipify -> compile -> verify -> benchmark -> record; a failed attempt
    (compile error, wrong answer, unusable answer) goes back to the writer with its log, `repairs` times ->
    distil findings.

What it costs: every request is a row of the run's llm_calls table; each candidate row carries its writer call's
tokens and cost. What can go wrong: an unusable writer answer or a dead endpoint costs only that candidate; an
unusable design ends the generation with no candidates (logged); a designer endpoint that stays down after the
retries fails the generation, to be rerun; a spent budget ends the generation with what it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from prefect import get_run_logger
from prefect.futures import wait

from ksci.evaluate.results import Status, Verdict
from ksci.lineage.store import LineageStore, LlmUsage
from ksci.llm import designer, findings, selector, writer
from ksci.llm.ask import Answer, BudgetExhausted, Ledger, LlmCallFailed, StageRequest
from ksci.llm.client import TransientLlmError
from ksci.llm.config import LlmConfig
from ksci.llm.knowledge import load_knowledge
from ksci.llm.ledger import LlmLedger
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, load_problem
from tasks.llm import asker

MAX_EXPERIMENTS = 12  # earlier experiments on the Base shown to the designer
MAX_PAST_FAILURES = 5  # recent failures on the Base shown to the writer
KEPT_PLANS = 3


@dataclass
class _Attempt:
    """One kept plan on its way through write -> evaluate -> repair."""

    index: int
    plan: designer.Plan
    feedback: list[writer.Feedback] = field(default_factory=list)
    done: bool = False


def llm_candidates(
    problem_name: str,
    target: str,
    run: str,
    generation: int,
    population: pd.DataFrame,
    config: LlmConfig,
    evaluate,
    fallback: str,
    seed: int,
    store_root: str,
    children: int,
) -> tuple[list[tuple], str]:
    """Run the three LLM stages and evaluate what they write. `evaluate(source, meta)` submits the evaluation chain
    of one source and returns its futures (compiled, verified, benched, recorded). Returns the chains and a note."""
    logger = get_run_logger()
    problem, dialect = load_problem(problem_name), DIALECT_OF_TARGET[target]
    ledger, ask = Ledger(store_root, run, generation), asker(config)
    store = LineageStore(store_root)

    knowledge = load_knowledge(problem, target)
    if population.empty:  # a problem without seed templates: the first kernels are written from the reference
        base = reference = reference_id = None
        experiments, plans = [], list(writer.FIRST_PLANS)
        logger.info("generation %d: no seed template; the writer starts from the reference", generation)
    else:
        answer, why = _answer(ask(selector.build_request(population, problem, target, config.prompts_dir), ledger))
        selection = selector.choose(answer, population, fallback, seed, why)
        if selection is None:
            return [], "no timed candidate to start from"
        logger.info("generation %d: base %s, reference %s (%s)", generation, *_ids(selection), selection.reason)
        base = _kernel(population, store, selection.base_id, dialect)
        reference_id = selection.reference_id
        reference = _kernel(population, store, reference_id, dialect) if reference_id else None
        earlier = LlmLedger(store_root).findings(run)
        lines = findings.as_lines(earlier[earlier["generation"] < generation])
        experiments = _experiments(population, selection.base_id)
        request = designer.build_request(
            problem, target, base, reference, knowledge, lines, experiments[-MAX_EXPERIMENTS:], config.prompts_dir
        )
        design, problem_text = _design(ask, request, ledger)
        if design is None:
            logger.warning("generation %d: the design is unusable (%s); no candidates", generation, problem_text)
            return [], f"design unusable: {problem_text}"
        logger.info("generation %d: kept plans: %s", generation, "; ".join(p.title for p in design.kept))
        plans = design.kept[:KEPT_PLANS]
    base_id = base["id"] if base else None

    attempts = [_Attempt(i, plan) for i, plan in enumerate(plans[:children])]
    chains, note, lost = [], "", []
    for attempt_number in range(1, config.repairs + 2):
        live = [a for a in attempts if not a.done]
        if not live:
            break
        futures = {}
        for a in live:
            req = writer.build_request(
                problem,
                target,
                dialect,
                base,
                reference,
                a.plan,
                knowledge,
                a.feedback,
                experiments[-MAX_PAST_FAILURES:] if attempt_number == 1 else [],
                slot=f"plan-{a.index}/attempt-{attempt_number}",
                prompts_dir=config.prompts_dir,
            )
            futures[a.index] = ask(req, ledger)
        evaluated = []
        for a in live:
            written, why = _answer(futures[a.index])
            if isinstance(why, str) and why.startswith("budget"):
                note = why
            elif written is None:
                lost.append(why)
            if written is None or written.value is None:
                reason = why or written.problem
                logger.warning(
                    "generation %d, plan %d, attempt %d: unusable: %s", generation, a.index, attempt_number, reason
                )
                a.feedback.append(writer.Feedback(attempt_number, "unusable answer", reason))
                a.done = (
                    written is None
                )  # a call that failed (endpoint, budget) ends the plan; a bad answer is repaired
                continue
            reply = written.reply
            source = writer.render_written(
                written.value, dialect, reply.model, a.plan, base_id, reference_id, attempt_number
            )
            hypothesis = a.plan.hypothesis()
            if attempt_number > 1:
                hypothesis = f"(repair {attempt_number - 1} after {a.feedback[-1].status}) {hypothesis}"
            meta = {
                "run": run,
                "generation": generation,
                "proposer": "llm",
                "parent_id": base_id,
                "reference_id": reference_id,
                "hypothesis": hypothesis,
                "template": None,
                "params": None,
                "llm": LlmUsage(reply.model, reply.prompt_tokens, reply.completion_tokens, reply.cost_usd),
            }
            chain = evaluate(source, meta)
            chains.append(chain)
            evaluated.append((a, source, chain))
        wait([chain[-1] for _, _, chain in evaluated])
        for a, source, (_compiled, _verified, benched, _recorded) in evaluated:
            verdict = benched.result(raise_on_failure=False)
            if not isinstance(verdict, Verdict) or verdict.status == Status.OK:
                a.done = True
                continue
            a.feedback.append(writer.Feedback(attempt_number, str(verdict.status), failure_report(verdict), source))
        if note:
            break
    if lost and not note:
        # The generation still completes (the other plans' candidates count); the note says what a rerun asks again.
        note = f"{len(lost)} of {len(attempts)} plans lost ({lost[0]}); rerun this run to ask again"
    return chains, note


def distil_findings(problem_name, target, run, generation, rows, population, config: LlmConfig, store_root) -> int:
    """The findings call after a generation; stores what it learnt. A failure here is logged, never fatal."""
    logger = get_run_logger()
    if not rows:
        return 0
    problem = load_problem(problem_name)
    store = LlmLedger(store_root)
    earlier = store.findings(run)
    lines = findings.as_lines(earlier[earlier["generation"] < generation])
    request = findings.build_request(
        problem, target, generation, findings.outcomes(rows, population), lines, config.prompts_dir
    )
    answer, why = _answer(asker(config)(request, Ledger(store_root, run, generation)))
    if answer is None or answer.value is None:
        logger.warning("generation %d: no findings (%s)", generation, why or answer.problem)
        return 0
    return store.add_findings(run, generation, answer.value)


def failure_report(verdict: Verdict) -> str:
    """What the writer is shown about a failed kernel: compile log, or mismatch reports and the harness output."""
    if verdict.status == Status.COMPILE_ERROR:
        log = verdict.compile.log if verdict.compile else ""
        return f"{verdict.message}\n{log}".strip()
    mismatches = [c.report for c in verdict.checks if not c.ok and c.report]
    parts = [verdict.message, *mismatches[:3], verdict.harness_log[-1500:]]
    return "\n".join(p for p in parts if p).strip() or str(verdict.status)


def _answer(future) -> tuple[Answer | None, str]:
    """The task's Answer, or None and why the call failed (endpoint down after retries, budget, bad request)."""
    try:
        return future.result(), ""
    except BudgetExhausted as exc:
        return None, str(exc)
    except (LlmCallFailed, TransientLlmError) as exc:
        return None, f"call failed: {exc}"


def _design(ask, request: StageRequest, ledger: Ledger):
    """The design, with one second chance for an unusable answer. A designer that cannot be reached raises."""
    future = ask(request, ledger)
    try:
        answer = future.result()
    except BudgetExhausted as exc:
        return None, str(exc)
    except LlmCallFailed as exc:
        return None, f"call failed: {exc}"
    except TransientLlmError as exc:
        raise RuntimeError(
            f"the experiment designer's endpoint did not answer after the retries ({exc}); rerun this run to continue"
        ) from exc
    if answer.value is not None:
        return answer.value, None
    retry = StageRequest(
        request.stage,
        "designer-retry",
        [
            *request.messages,
            {"role": "assistant", "content": answer.reply.text},
            {
                "role": "user",
                "content": f"That answer could not be used ({answer.problem}). Answer again with only "
                "the JSON object that the instructions describe.",
            },
        ],
        request.schema,
        request.context,
    )
    second, why = _answer(ask(retry, ledger))
    if second is None or second.value is None:
        return None, why or second.problem
    return second.value, None


def _kernel(population: pd.DataFrame, store: LineageStore, candidate_id: str, dialect: str) -> dict:
    rows = population[population["candidate_id"] == candidate_id].sort_values("geomean_us", na_position="last")
    row = rows.iloc[0]
    geomean = f"{row['geomean_us']:.2f} us" if pd.notna(row["geomean_us"]) else "not timed"
    return {
        "id": candidate_id,
        "source": store.read_source(row["source_path"]),
        "geomean": geomean,
        "hypothesis": " ".join(str(row["hypothesis"]).split()),
        "language": dialect,
        "suffix": SUFFIX_OF_DIALECT[dialect],
    }


def _experiments(population: pd.DataFrame, base_id: str) -> list[designer.Experiment]:
    children = population[population["parent_id"] == base_id].sort_values(["generation", "candidate_id"])
    return [
        designer.Experiment(
            hypothesis=" ".join(str(r["hypothesis"]).split())[:400],
            status=r["status"],
            result=f"{r['geomean_us']:.2f} us"
            if pd.notna(r["geomean_us"])
            else " ".join(str(r["message"]).split())[:200],
        )
        for _, r in children.iterrows()
    ]


def _ids(selection) -> tuple[str, str]:
    return selection.base_id, selection.reference_id or "none"
