"""One recorded, budgeted LLM call of a stage: check the budget, send, record the request, read the answer.

`ask_stage` is what the Prefect task `tasks.llm.ask_llm` runs. It always returns an Answer (ksci.llm.request):
- with the stage's parsed value;
- with a reply and a failure of kind unusable or truncated (no code block, malformed JSON, cut at max_tokens): such
  an answer costs only its own candidate, and the writer is asked to repair it;
- without a reply, with the call's failure (ksci.llm.faults): transient (429, 5xx, timeout, unreachable;
  tasks/llm.py has Prefect retry those), or not (auth, another 4xx, a bad body, the run's budget spent).
A 429 whose Retry-After asks for a wait gets it (at most retry_after_cap_s) and the request is sent once more here,
before Prefect's own backoff. Each request is sent only while the budget allows its maximum (ksci.llm.budget).
Every request sent, whatever its outcome, becomes one row of the run's llm_calls table (ksci.llm.ledger).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

from ksci.errors import TRUNCATED, UNUSABLE, Failure
from ksci.llm import designer, findings, selector, writer
from ksci.llm.budget import RESERVATIONS, call_maximum
from ksci.llm.client import LlmReply, chat
from ksci.llm.config import Budget, Price, StageSettings
from ksci.llm.faults import EndpointFailure, Fault, fault
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
    answer = _send(request, settings, ledger, store, call, price, budget)
    waited = answer.failure.retry_after_s if isinstance(answer.failure, EndpointFailure) else None
    if answer.reply is None and answer.failure.kind == Fault.RATE_LIMIT and waited is not None:
        time.sleep(min(waited, settings.retry_after_cap_s))  # as the endpoint asked, within the cap; then once more
        answer = _send(request, settings, ledger, store, call, price, budget)
    return answer


def _send(request, settings, ledger: Ledger, store: LlmLedger, call: LlmCall, price, budget: Budget) -> Answer:
    """One request, sent only while the budget allows its maximum, recorded before its reservation is given back
    (a spent budget sends and records nothing)."""
    call = replace(call, created_at=datetime.now(UTC))  # each request's own time: its row sorts after the one before
    need = call_maximum(request.messages, settings.max_tokens, price)
    spent = partial(store.spent, ledger.run)
    with RESERVATIONS.hold((str(ledger.root), ledger.run), budget, spent, need) as refused:
        if refused:
            return failed_call(fault(Fault.BUDGET, refused))
        reply = chat(settings, request.messages, request.schema, price)
        if isinstance(reply, Failure):
            store.record(replace(call, outcome=str(reply.kind), detail=reply.message[:500]))
            return failed_call(reply)
        value, problem = parser_of(request.stage)(reply.text, request.context)
        if problem and reply.truncated:
            problem = f"truncated answer (finish_reason=length, {reply.completion_tokens} tokens): {problem}"
        outcome = "ok" if problem is None else (TRUNCATED if reply.truncated else UNUSABLE)
        store.record(_answered(call, reply, outcome, problem or ""))
        return Answer(reply, value, None if problem is None else Failure(outcome, problem))


def _answered(call: LlmCall, reply: LlmReply, outcome: str, detail: str) -> LlmCall:
    return replace(
        call,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cost_usd=reply.cost_usd,
        latency_s=round(reply.latency_s, 3),
        finish_reason=reply.finish_reason,
        structured=reply.structured,
        outcome=outcome,
        detail=detail,
    )


def parser_of(stage: str) -> Parser:
    return PARSERS[stage]
