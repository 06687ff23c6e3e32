"""The README as a new user meets it: short, a quick start at the top, every command in its table, and no path
outside the repository in it or in docs/."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ksci import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_is_short_and_starts_with_a_quick_start():
    lines = README.splitlines()
    assert len(lines) < 120
    top = "\n".join(lines[:25])
    assert "## Quick start" in top and "make evolve SIMULATE=1" in top and "ksci report --run" in top
    assert top.index("SIMULATE=1") < top.index("GENERATIONS=5") < top.index("ksci report")  # no GPU, GPU, report
    assert max(map(len, lines)) <= 200


def test_every_command_is_in_the_readmes_table():
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    table = {m.group(1) for m in re.finditer(r"^\| `ksci (\w+)", README, re.M)}
    assert set(sub.choices) <= table, set(sub.choices) - table


def test_no_doc_points_outside_the_repository():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    outside = [f"{d.name}: {line}" for d in documents for line in d.read_text().splitlines() if "../shared" in line]
    assert outside == []
