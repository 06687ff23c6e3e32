"""Stage 2, the experiment designer: from the Base code, the knowledge base and the findings so far, the LLM lists
10 avenues of research, then writes 5 experiment plans (description, rubric of code changes, minimum and maximum
uplift, innovation score). Three are kept: the most innovative, the highest maximum uplift, the highest minimum.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ksci.llm.knowledge import Knowledge
from ksci.llm.parse import parse_structured
from ksci.llm.prompts import render_messages, stage_marker
from ksci.llm.request import StageRequest
from ksci.problem.spec import Problem

AVENUES, PLANS, KEPT = 10, 5, 3

_PLAN = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "description": {"type": "string"},
        "rubric": {"type": "array", "items": {"type": "string"}},
        "min_uplift_pct": {"type": "number"},
        "max_uplift_pct": {"type": "number"},
        "innovation": {"type": "number"},
    },
    "required": ["title", "description", "rubric", "min_uplift_pct", "max_uplift_pct", "innovation"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {
        "avenues": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "plans": {"type": "array", "items": _PLAN, "minItems": 1},
    },
    "required": ["avenues", "plans"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Plan:
    title: str
    description: str
    rubric: tuple[str, ...]
    min_uplift_pct: float
    max_uplift_pct: float
    innovation: float
    kept_as: str = ""  # why it was kept: most innovative, highest maximum uplift, highest minimum uplift

    def hypothesis(self) -> str:
        """The plan in one paragraph: what the lineage row records as the candidate's hypothesis."""
        changes = "; ".join(self.rubric)
        return (
            f"{self.title} [{self.kept_as}; expected uplift {self.min_uplift_pct:g}% to {self.max_uplift_pct:g}%, "
            f"innovation {self.innovation:g}/10]: {self.description} Changes: {changes}"
        )


@dataclass(frozen=True)
class Design:
    avenues: tuple[str, ...]
    plans: tuple[Plan, ...]  # every plan written
    kept: tuple[Plan, ...]  # the three kept, in the order above


@dataclass(frozen=True)
class Experiment:
    """A past experiment on the Base, shown to the designer: what was tried and what came of it."""

    hypothesis: str
    status: str
    result: str


def build_request(
    problem: Problem,
    target: str,
    base: dict,
    reference: dict | None,
    knowledge: Knowledge,
    findings: list[str],
    experiments: list[Experiment],
    prompts_dir=None,
) -> StageRequest:
    """base / reference: {"id", "source", "geomean", "hypothesis"} of the selected candidates."""
    values = {
        "marker": stage_marker("designer"),
        "problem": problem,
        "target": target,
        "base": base,
        "reference": reference,
        "knowledge": knowledge,
        "findings": findings,
        "experiments": experiments,
        "avenues": AVENUES,
        "plans": PLANS,
    }
    return StageRequest("designer", "designer", render_messages("designer", values, prompts_dir), SCHEMA, {})


def parse_answer(text: str, context: dict) -> tuple[Design | None, str | None]:
    value, problem = parse_structured(text, SCHEMA)
    if problem:
        return None, problem
    plans = tuple(
        Plan(
            title=" ".join(p["title"].split()),
            description=" ".join(p["description"].split()),
            rubric=tuple(" ".join(r.split()) for r in p["rubric"]),
            min_uplift_pct=float(p["min_uplift_pct"]),
            max_uplift_pct=float(p["max_uplift_pct"]),
            innovation=float(p["innovation"]),
        )
        for p in value["plans"]
    )
    return Design(tuple(value["avenues"]), plans, keep_three(plans)), None


def keep_three(plans: tuple[Plan, ...]) -> tuple[Plan, ...]:
    """The most innovative, then the highest maximum uplift, then the highest minimum uplift, each among the plans
    not kept yet (ties go to the earlier plan), so that three distinct plans are kept when there are three."""
    rules = (
        ("most innovative", lambda p: p.innovation),
        ("highest maximum uplift", lambda p: p.max_uplift_pct),
        ("highest minimum uplift", lambda p: p.min_uplift_pct),
    )
    left, kept = list(plans), []
    for label, score in rules:
        if not left:
            break
        best = max(left, key=score)  # max keeps the first of equals
        left.remove(best)
        kept.append(replace(best, kept_as=label))
    return tuple(kept)
