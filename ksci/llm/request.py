"""What a stage sends and what comes back: the request (prompt, schema, parser context), the answer, and where the
call is recorded. A module of its own so that the stage modules (selector, designer, writer, findings) and the
call (ksci.llm.ask, which picks each stage's parser) both import it and not each other."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ksci.errors import BUDGET, Failure
from ksci.llm.client import LlmReply


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
    """One call's outcome. `value`: the stage's typed result, None when `failure` says why there is none. With a
    `reply` the model answered but unusably (the writer repairs that); without one the call itself failed."""

    reply: LlmReply | None
    value: object | None
    failure: Failure | None = None

    @property
    def reason(self) -> str:
        """Why there is no value, as the logs, notes and the writer's feedback say it ("" when there is one)."""
        if self.failure is None:
            return ""
        if self.reply is not None:
            return self.failure.message
        return str(self.failure) if self.failure.kind == BUDGET else f"call failed: {self.failure}"

    @property
    def budget_spent(self) -> bool:
        return self.failure is not None and self.failure.kind == BUDGET


def failed_call(failure: Failure) -> Answer:
    """The answer of a call that got no reply (endpoint down after the retries, a 4xx, a spent budget)."""
    return Answer(None, None, failure)


@dataclass(frozen=True)
class Ledger:
    """Where a call is recorded: the store root, run and generation."""

    root: str
    run: str
    generation: int
