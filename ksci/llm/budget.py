"""The run's LLM budget, checked with what calls in flight may still spend.

A budget checked against the ledger alone lets every call that starts before the first answer is recorded go
through: three writers at once, each told "there is budget left", spent 5.3 times a budget of 8,000 tokens. So each
call reserves its maximum before it is sent (its prompt's estimated tokens plus max_tokens, and their price) and
gives the reservation back once its row is recorded; a call starts only while the recorded spending plus every
reservation is under the budget. The budget is then overshot by at most one call's maximum (the last one let in),
as long as the endpoint keeps to max_tokens.

Reservations are held in this process (where the LLM tasks of a run run, as threads); separate worker processes
of a deployed run each see the others' recorded calls only.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ksci.llm.config import Budget, Price

CHARS_PER_TOKEN = 3.0  # a cautious estimate (English prose is about 4, code and JSON less): over- not under-reserve


@dataclass(frozen=True)
class Need:
    """What one call may spend at most."""

    tokens: int
    usd: float


def call_maximum(messages: list[dict], max_tokens: int, price: Price | None) -> Need:
    prompt = math.ceil(len(json.dumps(messages, ensure_ascii=False)) / CHARS_PER_TOKEN)
    return Need(prompt + max_tokens, price.cost(prompt, max_tokens) if price else 0.0)


class Reservations:
    """The maxima of the calls in flight, per (store root, run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], list[Need]] = {}

    @contextmanager
    def hold(
        self, key: tuple[str, str], budget: Budget, spent: Callable[[], tuple[int, float]], need: Need
    ) -> Iterator[str | None]:
        """Yields None with `need` reserved for the block, or why the budget allows no further call."""
        if budget.tokens is None and budget.usd is None:
            yield None
            return
        with self._lock:
            tokens, usd = spent()
            held = self._held.setdefault(key, [])
            why = budget.exceeded(tokens, usd, sum(n.tokens for n in held), sum(n.usd for n in held))
            if why is None:
                held.append(need)
        if why is not None:
            in_flight = f" (with {len(held)} call(s) in flight)" if held else ""
            yield why + in_flight
            return
        try:
            yield None
        finally:
            with self._lock:
                held.remove(need)


RESERVATIONS = Reservations()
