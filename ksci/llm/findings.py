"""Findings: after each LLM generation, one call distils what worked and what failed into short findings, which
are stored with the run (ksci.llm.ledger) and given to the experiment designer of every later generation.
"""

from __future__ import annotations

import pandas as pd

from ksci.llm.ledger import Finding
from ksci.llm.parse import parse_structured
from ksci.llm.prompts import render_messages, stage_marker
from ksci.llm.request import StageRequest
from ksci.problem.spec import Problem

MAX_FINDINGS = 8
FINDING_CHARS = 400  # a finding is a sentence or two; longer ones are cut (8 findings of 1 MB made an 8 MB prompt)
EVIDENCE_CHARS = 300
MAX_FINDING_LINES = 40  # the most recent findings shown to the designer and the findings stage
KINDS = ("worked", "failed", "insight")

SCHEMA = {
    "type": "object",
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": list(KINDS)},
                    "text": {"type": "string"},
                    "evidence": {"type": "string"},
                },
                "required": ["kind", "text", "evidence"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["findings"],
    "additionalProperties": False,
}


def outcomes(rows: list[dict], population: pd.DataFrame) -> list[dict]:
    """A generation's rows with their parent's geomean beside their own (the timing against the parent)."""
    parents = {}
    if not population.empty:
        timed = population[population["geomean_us"].notna()]
        parents = timed.groupby("candidate_id")["geomean_us"].min().to_dict()
    result = []
    for row in rows:
        mine, theirs = row.get("geomean_us"), parents.get(row.get("parent_id"))
        change = f"{100.0 * (theirs - mine) / theirs:+.1f}% vs parent" if mine and theirs else "no comparison"
        result.append(
            {
                "id": row["candidate_id"],
                "parent": row.get("parent_id") or "-",
                "status": row["status"],
                "message": " ".join(str(row.get("message") or "").split())[:300],
                "geomean": f"{mine:.2f} us" if mine else "-",
                "parent_geomean": f"{theirs:.2f} us" if theirs else "-",
                "change": change,
                "hypothesis": " ".join(str(row.get("hypothesis") or "").split())[:600],
            }
        )
    return result


def build_request(
    problem: Problem,
    target: str,
    generation: int,
    results: list[dict],
    earlier: list[str],
    prompts_dir=None,
    base_profile: tuple[str, str] | None = None,
) -> StageRequest:
    """`base_profile`: (the Base's id, its profile digest) as the generation's designer and writer saw it, for the
    findings to cite; None when the generation took no profile."""
    values = {
        "marker": stage_marker("findings"),
        "problem": problem,
        "target": target,
        "generation": generation,
        "results": results,
        "earlier": earlier,
        "max_findings": MAX_FINDINGS,
        "base_profile": base_profile,
    }
    return StageRequest("findings", "findings", render_messages("findings", values, prompts_dir), SCHEMA, {})


def parse_answer(text: str, context: dict) -> tuple[list[Finding] | None, str | None]:
    value, problem = parse_structured(text, SCHEMA)
    if problem:
        return None, problem
    findings = [
        Finding(f["kind"], _cut(f["text"], FINDING_CHARS), _cut(f["evidence"], EVIDENCE_CHARS))
        for f in value["findings"][:MAX_FINDINGS]
        if f["text"].strip()
    ]
    return findings, None


def _cut(text: str, limit: int) -> str:
    """One line of at most `limit` characters, an ellipsis marking a cut."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def as_lines(frame: pd.DataFrame) -> list[str]:
    """Stored findings as the lines the designer reads: '[generation 1, worked] text (evidence)', the most recent
    MAX_FINDING_LINES, each cut to its length limit (rows stored before the limits were, too)."""
    lines = []
    for _, row in frame.tail(MAX_FINDING_LINES).iterrows():
        evidence = f" ({_cut(row['evidence'], EVIDENCE_CHARS)})" if row["evidence"] else ""
        lines.append(f"[generation {row['generation']}, {row['kind']}] {_cut(row['text'], FINDING_CHARS)}{evidence}")
    return lines
