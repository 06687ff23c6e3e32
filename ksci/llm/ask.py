"""One recorded, budgeted LLM call of a stage: check the budget, send, record the request, read the answer.

`ask_stage` is what the Prefect task `tasks.llm.ask_llm` runs. It always returns an Answer (ksci.llm.request):
- with the stage's parsed value;
- with a reply and a failure of kind unusable or truncated (no code block, malformed JSON, cut at max_tokens): such
  an answer costs only its own candidate, and the writer is asked to repair it;
- without a reply, with the call's failure: transient (429, 5xx, timeout, connection; tasks/llm.py has Prefect
  retry those), or not (a 4xx other than 429, an unreadable reply, the run's budget spent).
Every request sent, whatever its outcome, becomes one row of the run's llm_calls table (ksci.llm.ledger).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ksci.errors import BUDGET, TRUNCATED, UNUSABLE, Failure
from ksci.llm import designer, findings, selector, writer
from ksci.llm.client import chat
from ksci.llm.config import Budget, Price, StageSettings
from ksci.llm.ledger import LlmCall, LlmLedger
from ksci.llm.request import Answer, Ledger, StageRequest, failed_call

NO_BUDGET = Budget()
Parser = Callable[[str, dict], tuple[object | None, str | None]]
PARSERS: dict[str, Parser] = {
    "selector": selector.parse_answer,
    "designer": designer.parse_answer,
    "writer": writer.parse_answer,
    "findings": findings.parse_answer,
}

__all__ = ["Answer", "Ledger", "StageRequest", "ask_stage", "parser_of"]


def ask_stage(
    request: StageRequest,
    settings: StageSettings,
    ledger: Ledger,
    price: Price | None = None,
    budget: Budget = NO_BUDGET,
) -> Answer:
    store = LlmLedger(ledger.root)
    call = LlmCall(
        run=ledger.run,
        generation=ledger.generation,
        stage=request.stage,
        slot=request.slot,
        model=settings.model,
        prompt_sha256=request.digest(settings.model),
        outcome="ok",
    )
    spent = budget.exceeded(*store.spent(ledger.run))
    if spent:
        return failed_call(Failure(BUDGET, spent))  # nothing was sent, so nothing is recorded
    reply = chat(settings, request.messages, request.schema, price)
    if isinstance(reply, Failure):
        store.record(replace(call, outcome=reply.kind, detail=reply.message[:500]))
        return failed_call(reply)
    value, problem = parser_of(request.stage)(reply.text, request.context)
    if problem and reply.truncated:
        problem = f"truncated answer (finish_reason=length, {reply.completion_tokens} tokens): {problem}"
    outcome = "ok" if problem is None else (TRUNCATED if reply.truncated else UNUSABLE)
    store.record(
        replace(
            call,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost_usd=reply.cost_usd,
            latency_s=round(reply.latency_s, 3),
            finish_reason=reply.finish_reason,
            structured=reply.structured,
            outcome=outcome,
            detail=problem or "",
        )
    )
    return Answer(reply, value, None if problem is None else Failure(outcome, problem))


def parser_of(stage: str) -> Parser:
    return PARSERS[stage]
