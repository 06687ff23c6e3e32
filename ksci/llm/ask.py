"""One recorded, budgeted LLM call of a stage: check the budget, send, record the request, read the answer.

`ask_stage` is what the Prefect task `tasks.llm.ask_llm` runs. Its outcomes:
- an Answer with the stage's parsed value, or with `problem` saying why the answer is unusable (no code block,
  malformed JSON, truncated); such an answer costs only its own candidate;
- TransientLlmError (429, 5xx, timeout, connection), which Prefect retries with backoff;
- LlmCallFailed (a 4xx other than 429, an unreadable reply, or the run's budget spent), which is not retried.
Every request sent, whatever its outcome, becomes one row of the run's llm_calls table (ksci.llm.ledger).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ksci.llm.client import LlmFailure, LlmReply, TransientLlmError, chat
from ksci.llm.config import Budget, Price, StageSettings
from ksci.llm.ledger import LlmCall, LlmLedger


class LlmCallFailed(RuntimeError):
    """A call that asking again will not fix: the stage's candidates fail, the run goes on (or stops cleanly)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class BudgetExhausted(LlmCallFailed):
    """The run's token or money budget is spent: no further calls."""


@dataclass(frozen=True)
class StageRequest:
    """A stage's rendered prompt, its JSON schema (structured stages), and what its parser needs."""

    stage: str
    slot: str
    messages: list[dict]
    schema: dict | None = None
    context: dict = field(default_factory=dict)

    def digest(self, model: str) -> str:
        text = json.dumps({"model": model, "messages": self.messages, "schema": self.schema}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Answer:
    reply: LlmReply
    value: object | None  # the stage's typed result; None when unusable
    problem: str | None = None  # why the answer is unusable


@dataclass(frozen=True)
class Ledger:
    """Where a call is recorded: the store root, run and generation."""

    root: str
    run: str
    generation: int


NO_BUDGET = Budget()
Parser = Callable[[str, dict], tuple[object | None, str | None]]


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
        raise BudgetExhausted("budget", spent)  # nothing was sent, so nothing is recorded
    try:
        reply = chat(settings, request.messages, request.schema, price)
    except TransientLlmError as exc:
        store.record(_with(call, outcome=exc.kind, detail=str(exc)[:500]))
        raise
    if isinstance(reply, LlmFailure):
        store.record(_with(call, outcome=reply.kind, detail=reply.message[:500]))
        raise LlmCallFailed(reply.kind, reply.message)
    value, problem = parser_of(request.stage)(reply.text, request.context)
    if problem and reply.truncated:
        problem = f"truncated answer (finish_reason=length, {reply.completion_tokens} tokens): {problem}"
    outcome = "ok" if problem is None else ("truncated" if reply.truncated else "unusable")
    store.record(
        _with(
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
    return Answer(reply, value, problem)


def parser_of(stage: str) -> Parser:
    # Imported here: the stage modules import this one for StageRequest.
    from ksci.llm import designer, findings, selector, writer

    return {
        "selector": selector.parse_answer,
        "designer": designer.parse_answer,
        "writer": writer.parse_answer,
        "findings": findings.parse_answer,
    }[stage]


def _with(call: LlmCall, **changes) -> LlmCall:
    values = {**call.__dict__, **changes}
    return LlmCall(**values)
