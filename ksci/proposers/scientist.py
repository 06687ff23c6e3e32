"""The LLM kernel scientist as a Proposer (ksci.proposers.protocol), one generation at a time:

    select (LLM, falls back to a rule) -> design (10 avenues, 5 plans, 3 kept) -> for each kept plan: write ->
    submit (render into the harness template, hipify, compile, verify, benchmark, record) -> a failed attempt
    (compile error, wrong answer, unusable answer) goes back to the writer with its log, `repairs` times;
    after the generation: distil findings (conclude).

A problem without seed templates starts from the reference (the writer's FIRST_PLANS); one with seed templates is
seeded by the tuning proposer. The LLM call (`steps.ask`), the submission and the wait come in as callables.
What can go wrong, as values (ksci.errors.Failure inside each Answer): an unusable writer answer or a dead endpoint
costs only that candidate; an unusable design ends the generation with no candidates (logged); a designer endpoint
that stays down after the retries fails the generation (Proposed.failure), to be rerun; a spent budget ends the
generation with what it has; a refused key (401/403) stops the run (LlmEndpointRefused: exit code 3, one line). Every request is a row of the run's llm_calls table; each candidate row carries its
writer call's tokens and cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ksci.errors import Failure
from ksci.evaluate.results import Status, Verdict
from ksci.lineage.store import CandidateMeta, LineageStore, LlmUsage
from ksci.llm import designer, findings, selector, writer
from ksci.llm.config import LlmConfig
from ksci.llm.faults import Fault, LlmEndpointRefused
from ksci.llm.knowledge import load_knowledge
from ksci.llm.ledger import LlmLedger
from ksci.llm.request import Answer, Ledger, StageRequest
from ksci.problem.contract import hide_held_out
from ksci.problem.spec import SUFFIX_OF_DIALECT, load_problem
from ksci.profile.store import base_profile
from ksci.profile.view import NO_PROFILE_STEP, hardware_view
from ksci.proposers.protocol import GenerationContext, Proposed, Proposer, Steps
from ksci.run import RunSpec

MAX_EXPERIMENTS = 12  # earlier experiments on the Base shown to the designer
MAX_PAST_FAILURES = 5  # recent failures on the Base shown to the writer
KEPT_PLANS = 3
DESIGN_RETRY = (
    "That answer could not be used ({why}). Answer again with only the JSON object that the instructions describe."
)


@dataclass
class _Attempt:
    """One kept plan on its way through write -> evaluate -> repair."""

    index: int
    plan: designer.Plan
    feedback: list[writer.Feedback] = field(default_factory=list)
    done: bool = False


@dataclass(frozen=True)
class _Start:
    """What the writer works from: the Base and the Reference (none from the reference implementation), the Base's
    earlier experiments, the plans to write."""

    bench: writer.Workbench
    experiments: list[designer.Experiment]
    plans: list[designer.Plan]

    @property
    def base_id(self) -> str | None:
        return self.bench.base["id"] if self.bench.base else None

    @property
    def reference_id(self) -> str | None:
        return self.bench.reference["id"] if self.bench.reference else None


class _Asked:
    """A call sent (steps.ask's pending answer); result() gives its Answer, but raises LlmEndpointRefused when the
    endpoint refused the key: every later call would be refused too, so the run stops (exit code 3)."""

    def __init__(self, pending) -> None:
        self.pending = pending

    def result(self) -> Answer:
        answer = self.pending.result()
        if answer.failure is not None and answer.reply is None and answer.failure.kind == Fault.AUTH:
            raise LlmEndpointRefused(answer.failure)
        return answer


class ScientistProposer:
    def __init__(self, config: LlmConfig, seeds: Proposer) -> None:
        self.config, self.seeds = config, seeds

    def propose(self, context: GenerationContext, steps: Steps) -> Proposed:
        if _seeded(context):  # generation 0 of a problem with seed templates: the templates' defaults
            return self.seeds.propose(context, steps)
        start = self._start(context, steps)
        proposed = start if isinstance(start, Proposed) else Proposed(*self._write(context, steps, start))
        if proposed.failure is None:
            note = f" ({proposed.note})" * bool(proposed.note)
            steps.logger.info(
                "generation %d: %d candidates from the LLM%s", context.generation, len(proposed.chains), note
            )
        return proposed

    def conclude(self, context: GenerationContext, rows: list[dict], steps: Steps) -> None:
        """The findings call after a generation; stores what it learnt. A failure here is logged, never fatal."""
        if _seeded(context) or not rows:
            return
        spec, generation = context.spec, context.generation
        store = LlmLedger(spec.store_root)
        earlier = store.findings(spec.run)
        lines = findings.as_lines(earlier[earlier["generation"] < generation])
        outcomes = findings.outcomes(rows, context.population)
        problem = load_problem(spec.problem)
        profiled = base_profile(spec.store_root, spec.run, generation)  # the digest the designer was shown
        cited = (profiled.candidate_id, profiled.digest) if profiled else None
        request = findings.build_request(
            problem, spec.target, generation, outcomes, lines, self.config.prompts_dir, base_profile=cited
        )
        answer = self._ask(context, steps, request).result()
        if answer.value is None:
            steps.logger.warning("generation %d: no findings (%s)", generation, answer.reason)
            return
        store.add_findings(spec.run, generation, answer.value)

    def stop_reason(self, spec: RunSpec) -> str | None:
        return self.config.budget.exceeded(*LlmLedger(spec.store_root).spent(spec.run))

    def _ask(self, context: GenerationContext, steps: Steps, request: StageRequest) -> _Asked:
        ledger = Ledger(context.spec.store_root, context.spec.run, context.generation)
        return _Asked(steps.ask(self.config, request, ledger))

    def _start(self, context: GenerationContext, steps: Steps) -> _Start | Proposed:
        """Select the Base and Reference, design the plans; a Proposed when the generation ends here."""
        spec, population, generation = context.spec, context.population, context.generation
        problem = load_problem(spec.problem)
        knowledge = load_knowledge(problem, spec.target)
        if population.empty:  # a problem without seed templates: the first kernels are written from the reference
            steps.logger.info("generation %d: no seed template; the writer starts from the reference", generation)
            bench = writer.Workbench(
                problem, spec.target, context.dialect, None, None, knowledge, self.config.prompts_dir
            )
            return _Start(bench, [], list(writer.FIRST_PLANS))
        request = selector.build_request(population, problem, spec.target, self.config.prompts_dir)
        selection = selector.choose(
            self._ask(context, steps, request).result(), population, spec.strategy, context.turn_seed
        )
        if selection is None:
            return Proposed([], "no timed candidate to start from")
        steps.logger.info(
            "generation %d: base %s, reference %s (%s)",
            generation, selection.base_id, selection.reference_id or "none", selection.reason,
        )  # fmt: skip
        store = LineageStore(spec.store_root)
        base = _kernel(population, store, selection.base_id, context.dialect)
        reference_id = selection.reference_id
        reference = _kernel(population, store, reference_id, context.dialect) if reference_id else None
        experiments = _experiments(population, selection.base_id)
        digest = steps.profile(base["source"], selection.base_id) if steps.profile else NO_PROFILE_STEP
        base["hardware"] = hardware_view(problem, population, selection.base_id, reference_id, digest, spec.target)
        bench = writer.Workbench(
            problem, spec.target, context.dialect, base, reference, knowledge, self.config.prompts_dir
        )
        start = _Start(bench, experiments, [])
        return self._design(context, steps, start)

    def _design(self, context: GenerationContext, steps: Steps, start: _Start) -> _Start | Proposed:
        """The design, with one second chance for an unusable answer. A designer that cannot be reached fails the
        generation, to be rerun."""
        spec, generation = context.spec, context.generation
        earlier = LlmLedger(spec.store_root).findings(spec.run)
        lines = findings.as_lines(earlier[earlier["generation"] < generation])
        request = designer.build_request(
            start.bench.problem, spec.target, start.bench.base, start.bench.reference, start.bench.knowledge, lines,
            start.experiments[-MAX_EXPERIMENTS:], self.config.prompts_dir,
        )  # fmt: skip
        answer = self._ask(context, steps, request).result()
        if answer.reply is None and answer.failure.transient:
            why = f"the experiment designer's endpoint did not answer after the retries ({answer.failure}); rerun "
            return Proposed([], failure=Failure(answer.failure.kind, why + "this run to continue", transient=True))
        if answer.value is None and answer.reply is not None:
            answer = self._ask(context, steps, _design_retry(request, answer)).result()
        if answer.value is None:
            steps.logger.warning("generation %d: the design is unusable (%s); no candidates", generation, answer.reason)
            return Proposed([], f"design unusable: {answer.reason}")
        steps.logger.info("generation %d: kept plans: %s", generation, "; ".join(p.title for p in answer.value.kept))
        return _Start(start.bench, start.experiments, list(answer.value.kept[:KEPT_PLANS]))

    def _write(self, context: GenerationContext, steps: Steps, start: _Start) -> tuple[list, str]:
        """Write each plan, submit what was written, repair what failed; the chains and the generation's note."""
        attempts = [_Attempt(i, plan) for i, plan in enumerate(start.plans[: context.spec.children])]
        chains, note, lost = [], "", []
        for number in range(1, self.config.repairs + 2):
            live = [a for a in attempts if not a.done]
            if not live:
                break
            sent = {a.index: self._ask(context, steps, self._write_request(start, a, number)) for a in live}
            evaluated = []
            for a in live:
                answer = sent[a.index].result()
                if answer.budget_spent:
                    note = answer.reason
                elif answer.reply is None:
                    lost.append(answer.reason)
                if answer.value is None:
                    _unusable(context, steps, a, number, answer)
                    continue
                source, meta = self._candidate(context, start, a, number, answer)
                evaluated.append((a, source, steps.submit(source, meta)))
            chains += [chain for *_, chain in evaluated]
            steps.wait([chain for *_, chain in evaluated])
            for a, source, chain in evaluated:
                _judge(a, number, source, steps.verdict(chain))
            if note:
                break
        if lost and not note:
            # The generation still completes (the other plans' candidates count); the note says what a rerun asks again.
            note = f"{len(lost)} of {len(attempts)} plans lost ({lost[0]}); rerun this run to ask again"
        return chains, note

    @staticmethod
    def _write_request(start: _Start, attempt: _Attempt, number: int) -> StageRequest:
        past_failures = start.experiments[-MAX_PAST_FAILURES:] if number == 1 else []
        slot = f"plan-{attempt.index}/attempt-{number}"
        return writer.build_request(start.bench, attempt.plan, attempt.feedback, past_failures, slot)

    @staticmethod
    def _candidate(
        context: GenerationContext, start: _Start, attempt: _Attempt, number: int, answer: Answer
    ) -> tuple[str, CandidateMeta]:
        """The written code in its harness template, and where it came from."""
        reply = answer.reply
        source = writer.render_written(
            answer.value, context.dialect, reply.model, attempt.plan, start.base_id, start.reference_id, number
        )
        hypothesis = attempt.plan.hypothesis()
        if number > 1:
            hypothesis = f"(repair {number - 1} after {attempt.feedback[-1].status}) {hypothesis}"
        meta = CandidateMeta(
            run=context.spec.run,
            generation=context.generation,
            proposer="llm",
            parent_id=start.base_id,
            reference_id=start.reference_id,
            hypothesis=hypothesis,
            llm=LlmUsage(reply.model, reply.prompt_tokens, reply.completion_tokens, reply.cost_usd),
        )
        return source, meta


def failure_report(verdict: Verdict) -> str:
    """What the writer is shown about a failed kernel: compile log, or mismatch reports and the harness output."""
    if verdict.status == Status.COMPILE_ERROR:
        log = verdict.compile.log if verdict.compile else ""
        return f"{verdict.message}\n{log}".strip()
    held_out = "held-out shape" in verdict.message  # its mismatch report would tell the shape (its rows): left out
    mismatches = [c.report for c in verdict.checks if not c.ok and c.report and not held_out]
    parts = [hide_held_out(verdict.message), *mismatches[:3], verdict.harness_log[-1500:]]
    return "\n".join(p for p in parts if p).strip() or str(verdict.status)


def _seeded(context: GenerationContext) -> bool:
    """Whether this generation is seeded from the templates (no LLM): generation 0 of a problem that has some."""
    return context.population.empty and bool(load_problem(context.spec.problem).templates_for(context.dialect))


def _unusable(context: GenerationContext, steps: Steps, attempt: _Attempt, number: int, answer: Answer) -> None:
    """A written answer without code: a bad answer goes back to the writer; a failed call (endpoint, budget) ends
    the plan."""
    steps.logger.warning(
        "generation %d, plan %d, attempt %d: unusable: %s", context.generation, attempt.index, number, answer.reason
    )
    attempt.feedback.append(writer.Feedback(number, "unusable answer", answer.reason))
    attempt.done = answer.reply is None


def _judge(attempt: _Attempt, number: int, source: str, verdict: Verdict | None) -> None:
    """A timed kernel (or one whose stages failed) ends its plan; a compile error or a wrong answer is repaired."""
    if verdict is None or verdict.status == Status.OK:
        attempt.done = True
        return
    attempt.feedback.append(writer.Feedback(number, str(verdict.status), failure_report(verdict), source))


def _design_retry(request: StageRequest, answer: Answer) -> StageRequest:
    messages = [
        *request.messages,
        {"role": "assistant", "content": answer.reply.text},
        {"role": "user", "content": DESIGN_RETRY.format(why=answer.failure.message)},
    ]
    return StageRequest(request.stage, "designer-retry", messages, request.schema, request.context)


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


def make(llm: LlmConfig | None) -> ScientistProposer:
    """The registry's factory (ksci.proposers.registry): the LLM scientist, seeded by the tuning proposer."""
    if llm is None:
        raise ValueError("the llm proposer needs an LLM configuration")
    from ksci.proposers.tuning_proposer import TuningProposer

    return ScientistProposer(llm, seeds=TuningProposer())
