"""Stage 1, the evolutionary selector: an LLM picks the Base and the Reference from the population listing.

It is a plugin of the selection contract (ksci.proposers.select): `llm_strategy(ask, ...)` returns a function
`(population, count, rng) -> list[Selection]`. An unusable answer (no JSON, an id not in the population, a
dead endpoint) falls back to a rule (elitist by default), and the selection's reason says so.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pandas as pd

from ksci.evaluate.results import Status
from ksci.lineage.store import shape_times
from ksci.llm.parse import parse_structured
from ksci.llm.prompts import render_messages, stage_marker
from ksci.llm.request import Answer, StageRequest
from ksci.problem.spec import Problem, shape_key
from ksci.proposers.select import Selection, Strategy, competitors, select_parents

MAX_LISTED = 40  # timed candidates shown (fastest first)
MAX_FAILED = 15  # most recent failures shown with their verdicts
HYPOTHESIS_CHARS = 240

SCHEMA = {
    "type": "object",
    "properties": {
        "base_id": {"type": "string"},
        "reference_id": {"type": ["string", "null"]},
        "reason": {"type": "string"},
    },
    "required": ["base_id", "reference_id", "reason"],
    "additionalProperties": False,
}


def population_listing(population: pd.DataFrame, problem: Problem) -> dict:
    """What the selector sees: ids, parents, per-shape times, verdicts and hypotheses."""
    shapes = [shape_key(s) for s in problem.benchmarks]
    timed = competitors(population).head(MAX_LISTED)
    failed = population[population["status"] != str(Status.OK)] if not population.empty else population
    failed = failed.sort_values(["generation", "candidate_id"], kind="stable").tail(MAX_FAILED)
    return {
        "shapes": shapes,
        "timed": [_entry(row, shapes) for _, row in timed.iterrows()],
        "failed": [_entry(row, shapes) for _, row in failed.iterrows()],
    }


def _entry(row: pd.Series, shapes: list[str]) -> dict:
    times = shape_times(row.get("shape_times_json"))
    geomean = row.get("geomean_us")
    return {
        "id": row["candidate_id"],
        "parent": row["parent_id"] if isinstance(row.get("parent_id"), str) else "-",
        "generation": int(row["generation"]),
        "proposer": row["proposer"],
        "status": row["status"],
        "message": str(row.get("message") or "")[:HYPOTHESIS_CHARS],
        "geomean": f"{geomean:.2f}" if pd.notna(geomean) else "-",
        "times": [f"{times[s]:.1f}" if s in times else "-" for s in shapes],
        "hypothesis": " ".join(str(row.get("hypothesis") or "").split())[:HYPOTHESIS_CHARS],
    }


def build_request(population: pd.DataFrame, problem: Problem, target: str, prompts_dir=None) -> StageRequest:
    listing = population_listing(population, problem)
    values = {"marker": stage_marker("selector"), "problem": problem, "target": target, **listing}
    ids = [entry["id"] for entry in listing["timed"]]
    messages = render_messages("selector", values, prompts_dir)
    return StageRequest("selector", "selector", messages, SCHEMA, {"ids": ids})


def parse_answer(text: str, context: dict) -> tuple[Selection | None, str | None]:
    value, problem = parse_structured(text, SCHEMA)
    if problem:
        return None, problem
    ids = context["ids"]
    base = _resolve(value["base_id"], ids)
    if base is None:
        return None, f"base_id {value['base_id']!r} is not a timed candidate of the population"
    reference = _resolve(value["reference_id"], ids) if value["reference_id"] else None
    if reference == base:
        reference = None
    return Selection(base, reference, f"LLM selector: {' '.join(value['reason'].split())}"), None


def _resolve(given: str, ids: list[str]) -> str | None:
    """The id the model meant: exact, or a unique prefix of at least 6 characters (models shorten ids)."""
    given = given.strip()
    if given in ids:
        return given
    matches = [i for i in ids if len(given) >= 6 and i.startswith(given)]
    return matches[0] if len(matches) == 1 else None


def choose(answer: Answer, population: pd.DataFrame, fallback: str, seed: int) -> Selection | None:
    """The LLM's selection, else the fallback rule's best (None when nothing in the population is timed)."""
    if answer.value is not None:
        return answer.value
    ruled = select_parents(fallback, population, 1, seed)
    if not ruled:
        return None
    first = ruled[0]
    reason = answer.reason or "no answer"
    return Selection(first.base_id, first.reference_id, f"LLM selector unusable ({reason}); {fallback}: {first.reason}")


def llm_strategy(
    ask: Callable[[StageRequest], Answer], problem: Problem, target: str, fallback: str = "elitist"
) -> Strategy:
    """The selector as a strategy of the selection contract. `ask` sends a request (ksci.llm.ask.ask_stage)."""

    def strategy(population: pd.DataFrame, count: int, rng: random.Random) -> list[Selection]:
        if count <= 0 or competitors(population).empty:
            return []
        seed = rng.randrange(2**31)
        first = choose(ask(build_request(population, problem, target)), population, fallback, seed)
        rest = [s for s in select_parents(fallback, population, count, seed) if s.base_id != first.base_id]
        return [first, *rest][:count]

    return strategy
