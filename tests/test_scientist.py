"""The LLM scientist's generation as plain Python (ksci.proposers.scientist): the LLM call, the candidate's
submission and the wait are fakes, so every path (repairs, unusable answers, the design's second chance, a spent
budget, lost plans, a designer that stays down, the findings) runs in milliseconds. The same loop under Prefect,
against the scripted endpoint: tests/test_llm_flow.py."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pandas as pd
import pytest

from ksci.errors import BUDGET, Failure
from ksci.evaluate.results import Status
from ksci.lineage.store import Candidate, LineageStore, empty_frame
from ksci.llm import designer, writer
from ksci.llm.client import LlmReply
from ksci.llm.config import LlmConfig
from ksci.llm.ledger import Finding, LlmLedger
from ksci.llm.request import Answer, failed_call
from ksci.proposers.protocol import GenerationContext, Proposed, Steps
from ksci.proposers.scientist import ScientistProposer
from ksci.proposers.select import Selection
from ksci.run import RunSpec

BASE, REFERENCE = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
PLANS = tuple(designer.Plan(f"plan {i}", f"do {i}", ("r",), 1.0, 2.0 + i, 3.0 - i) for i in range(5))
KERNEL = 'extern "C" int fp8_gemm(void* s) { return 0; }\n'


def _reply(text: str = "...") -> LlmReply:
    return LlmReply(text, "stop", "fake-model", 10, 20, 0.001, 0.1, True)


def _ok(value) -> Answer:
    return Answer(_reply(), value)


def _unusable(why: str = "no code block") -> Answer:
    return Answer(_reply("prose"), None, Failure("unusable", why))


WRITTEN = _ok(writer.WrittenKernel(KERNEL, "source"))
DESIGN = _ok(designer.Design(("a",), PLANS, designer.keep_three(PLANS)))
SELECTED = _ok(Selection(BASE, REFERENCE, "LLM selector: contrast"))


class FakeLlm:
    """Answers each stage from a list, in order; records every request sent."""

    def __init__(self, **answers: list[Answer]) -> None:
        self.answers, self.requests = {k: list(v) for k, v in answers.items()}, []

    def ask(self, config, request, ledger):
        self.requests.append(request)
        answer = self.answers[request.stage].pop(0)
        return SimpleNamespace(result=lambda: answer)

    def sent(self, stage: str) -> list:
        return [r for r in self.requests if r.stage == stage]


class FakeEvaluation:
    """Submitted candidates and the verdicts they get: a status per submission, in order (default ok)."""

    def __init__(self, statuses: list[Status] | None = None) -> None:
        self.statuses, self.submitted, self.waited = list(statuses or []), [], []

    def submit(self, source, meta):
        self.submitted.append((source, meta))
        status = self.statuses.pop(0) if self.statuses else Status.OK
        compiled = SimpleNamespace(log="error: identifier LOG-TEXT is undefined")
        return SimpleNamespace(status=status, message=f"{status}", compile=compiled, checks=[], harness_log="")

    def steps(self, llm: FakeLlm) -> Steps:
        return Steps(submit=self.submit, wait=self.waited.append, verdict=lambda chain: chain, ask=llm.ask, logger=_LOG)


_LOG = logging.getLogger("test_scientist")


def _population(store: LineageStore) -> pd.DataFrame:
    path = store.put_source(KERNEL, ".cu")
    rows = [
        Candidate(
            run="r", problem="fp8_gemm", generation=0, candidate_id=cid, proposer="seed", template=t,
            source_path=path, target="cuda", status="ok", geomean_us=g, hypothesis="seed",
        )
        for cid, t, g in ((BASE, "mma", 100.0), (REFERENCE, "naive", 900.0))
    ]  # fmt: skip
    return pd.concat([empty_frame(), pd.DataFrame([r.__dict__ for r in rows])], ignore_index=True)


def _context(tmp_path, generation: int = 1, population=None, **spec) -> GenerationContext:
    store = LineageStore(tmp_path)
    spec = RunSpec(problem="fp8_gemm", run="r", store_root=str(tmp_path), children=3, proposer="llm", **spec)
    return GenerationContext(spec, generation, _population(store) if population is None else population)


def _scientist(seeds=None, **config) -> ScientistProposer:
    return ScientistProposer(LlmConfig(model="fake-model", **config), seeds=seeds)


def test_a_compile_error_is_repaired_with_its_log_and_an_unusable_answer_is_asked_again(tmp_path):
    llm = FakeLlm(selector=[SELECTED], designer=[DESIGN], writer=[WRITTEN, _unusable(), WRITTEN, WRITTEN, WRITTEN])
    evaluation = FakeEvaluation([Status.COMPILE_ERROR, Status.OK])
    proposed = _scientist().propose(_context(tmp_path), evaluation.steps(llm))

    assert len(proposed.chains) == 4 and proposed.note == "" and proposed.failure is None
    hypotheses = [meta.hypothesis for _, meta in evaluation.submitted]
    assert hypotheses[2].startswith("(repair 1 after compile_error)")
    assert hypotheses[3].startswith("(repair 1 after unusable answer)")
    metas = [meta for _, meta in evaluation.submitted]
    assert {(m.proposer, m.parent_id, m.reference_id, m.llm.model) for m in metas} == {
        ("llm", BASE, REFERENCE, "fake-model")
    }
    repair = [r for r in llm.sent("writer") if r.slot == "plan-0/attempt-2"][0]
    assert "LOG-TEXT" in str(repair.messages)  # the compile log goes back to the writer
    assert [len(batch) for batch in evaluation.waited] == [2, 2]  # each attempt waits for what it submitted


def test_repairs_stop_after_the_configured_number(tmp_path):
    llm = FakeLlm(selector=[SELECTED], designer=[DESIGN], writer=[WRITTEN] * 3)
    evaluation = FakeEvaluation([Status.WRONG] * 3)
    proposed = _scientist(repairs=0).propose(_context(tmp_path), evaluation.steps(llm))
    assert len(proposed.chains) == 3 and len(llm.sent("writer")) == 3  # no second attempt


def test_an_unusable_design_gets_one_second_chance(tmp_path):
    llm = FakeLlm(selector=[SELECTED], designer=[_unusable("malformed JSON"), DESIGN], writer=[WRITTEN] * 3)
    proposed = _scientist().propose(_context(tmp_path), FakeEvaluation().steps(llm))
    retry = llm.sent("designer")[1]
    assert retry.slot == "designer-retry" and "That answer could not be used (malformed JSON)" in str(retry.messages)
    assert retry.messages[-2] == {"role": "assistant", "content": "prose"}
    assert len(proposed.chains) == 3


def test_a_design_unusable_twice_ends_the_generation_with_no_candidates(tmp_path):
    llm = FakeLlm(selector=[SELECTED], designer=[_unusable("a"), _unusable("b")])
    proposed = _scientist().propose(_context(tmp_path), FakeEvaluation().steps(llm))
    assert proposed == Proposed([], "design unusable: b")


def test_a_designer_that_stays_down_fails_the_generation_for_a_rerun(tmp_path):
    down = failed_call(Failure("http_503", "unavailable", transient=True))
    llm = FakeLlm(selector=[SELECTED], designer=[down])
    proposed = _scientist().propose(_context(tmp_path), FakeEvaluation().steps(llm))
    assert (
        not proposed.chains and "did not answer after the retries (http_503: unavailable)" in proposed.failure.message
    )


def test_a_spent_budget_ends_the_generation_with_what_it_has(tmp_path):
    spent = failed_call(Failure(BUDGET, "token budget spent: 120 of 100"))
    llm = FakeLlm(selector=[spent], designer=[DESIGN], writer=[WRITTEN, spent, spent])
    evaluation = FakeEvaluation([Status.WRONG])
    proposed = _scientist().propose(_context(tmp_path), evaluation.steps(llm))
    assert proposed.note == "budget: token budget spent: 120 of 100"
    assert len(proposed.chains) == 1 and len(llm.sent("writer")) == 3  # no repair once the budget is spent
    assert llm.sent("selector")  # the selector's failure fell back to the rule, not the generation


def test_plans_whose_calls_failed_are_noted_for_a_rerun(tmp_path):
    lost = failed_call(Failure("connection", "refused", transient=True))
    llm = FakeLlm(selector=[SELECTED], designer=[DESIGN], writer=[lost, WRITTEN, lost])
    proposed = _scientist().propose(_context(tmp_path), FakeEvaluation().steps(llm))
    assert len(proposed.chains) == 1
    assert proposed.note == "2 of 3 plans lost (call failed: connection: refused); rerun this run to ask again"


def test_nothing_timed_to_start_from_ends_the_generation(tmp_path):
    population = _population(LineageStore(tmp_path)).assign(status="wrong", geomean_us=None)
    llm = FakeLlm(selector=[_unusable()])
    proposed = _scientist().propose(_context(tmp_path, population=population), FakeEvaluation().steps(llm))
    assert proposed == Proposed([], "no timed candidate to start from")


def test_generation_0_of_a_problem_with_templates_is_seeded_and_concludes_nothing(tmp_path):
    seeds = SimpleNamespace(propose=lambda context, steps: Proposed(["seeded"], "by the templates"))
    llm = FakeLlm()
    scientist = _scientist(seeds=seeds)
    context = _context(tmp_path, generation=0, population=empty_frame())
    assert scientist.propose(context, FakeEvaluation().steps(llm)) == Proposed(["seeded"], "by the templates")
    scientist.conclude(context, [{"candidate_id": "x", "status": "ok"}], FakeEvaluation().steps(llm))
    assert llm.requests == []


def test_findings_are_stored_and_a_failed_findings_call_is_only_logged(tmp_path, caplog):
    finding = Finding("worked", "smaller tiles", "gen 1")
    llm = FakeLlm(findings=[_ok([finding]), _unusable("truncated")])
    rows = [{"candidate_id": "cccccccccccccccc", "parent_id": BASE, "status": "ok", "geomean_us": 90.0}]
    scientist, context = _scientist(), _context(tmp_path)
    scientist.conclude(context, rows, FakeEvaluation().steps(llm))
    assert list(LlmLedger(tmp_path).findings("r")["text"]) == ["smaller tiles"]
    with caplog.at_level("WARNING", logger="test_scientist"):
        scientist.conclude(_context(tmp_path, generation=2), rows, FakeEvaluation().steps(llm))
    assert "generation 2: no findings (truncated)" in caplog.text


@pytest.mark.parametrize(("budget_tokens", "stops"), [(None, False), (1, True)])
def test_a_spent_budget_stops_the_run_before_a_generation(tmp_path, budget_tokens, stops):
    from ksci.llm.config import Budget
    from ksci.llm.ledger import LlmCall

    call = dict(run="r", generation=1, stage="writer", slot="s", model="m", prompt_sha256="sha", outcome="ok")
    LlmLedger(tmp_path).record(LlmCall(**call, prompt_tokens=5, completion_tokens=5))
    scientist = _scientist(budget=Budget(tokens=budget_tokens))
    assert bool(scientist.stop_reason(_context(tmp_path).spec)) == stops
