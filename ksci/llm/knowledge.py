"""The knowledge base the experiment designer and kernel writer read: architecture notes per target and notes
per problem, written in the project's own words (knowledge/targets/*.md, kernels/<problem>/knowledge.md).
Findings learnt during a run are stored with the run (ksci.llm.ledger), not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ksci import PROJECT_ROOT
from ksci.problem.spec import Problem

KNOWLEDGE_DIR = PROJECT_ROOT / "knowledge"
TARGET_NOTES = {"cuda": "hopper.md", "rocm": "cdna3.md"}  # the first GPU of each target that ksci is tuned for


@dataclass(frozen=True)
class Knowledge:
    target_notes: str
    problem_notes: str


def load_knowledge(problem: Problem, target: str, folder: Path = KNOWLEDGE_DIR) -> Knowledge:
    target_file = folder / "targets" / TARGET_NOTES[target]
    problem_file = problem.file("knowledge.md")  # refused when it links outside the problem folder
    return Knowledge(
        target_notes=target_file.read_text().strip() if target_file.is_file() else "",
        problem_notes=problem_file.read_text().strip() if problem_file.is_file() else "",
    )
