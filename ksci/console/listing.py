"""How `ksci problems` lists the problems: one entry per problem (its JSON form), and aligned lines for the
terminal. Here rather than in ksci/problem/, whose files are in the verdicts' cache keys (tasks/cache_keys.py): a
changed printed line must not recompute any verdict."""

from __future__ import annotations

import re

from ksci.problem.spec import ProblemError, load_problem


def problem_entry(name: str) -> dict:
    """A problem's listing as JSON: its counts, whole description, templates and each benchmark's flops (null
    where unknown); or its name and why it is broken."""
    try:
        p = load_problem(name)
    except ProblemError as exc:
        return {"name": name, "broken": str(exc)}
    return {
        "name": p.name,
        "entry_point": p.entry_signature,
        "tests": len(p.tests),
        "benchmarks": len(p.benchmarks),
        "flops": p.benchmark_flops(),
        "description": p.description.strip(),
        "templates": {d: [t.name for t in p.templates_for(d)] for d in ("cuda", "hip")},
    }


def problem_cells(entry: dict) -> list[str]:
    """name, tests, benchmarks, flops, then the description's first sentence whole (lines joined, not cut)."""
    if "broken" in entry:
        return [entry["name"], f"broken: {entry['broken']}"]
    known = [f for f in entry["flops"] if f]
    flops = f"up to {_si(max(known))}FLOP" if known else "flops unknown"
    text = " ".join(entry["description"].split())
    sentence = re.match(r"(.+?[.!?])(\s|$)", text)
    return [entry["name"], _count(entry["tests"], "test"), _count(entry["benchmarks"], "benchmark"), flops,
            sentence.group(1) if sentence else text]  # fmt: skip


def aligned(rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell (the numbers of "11 tests" / "1 test" right-aligned), the last cell of
    each row as long as it is."""
    columns = max(len(row) for row in rows) - 1 if rows else 0
    numbers = [max((len(r[i].split()[0]) for r in rows if len(r) > i + 1 and r[i][:1].isdigit()), default=0)
               for i in range(columns)]  # fmt: skip
    rows = [[c.rjust(len(c) + numbers[i] - len(c.split()[0])) if c[:1].isdigit() else c for i, c in enumerate(r[:-1])]
            + r[-1:] for r in rows]  # fmt: skip
    widths = [max((len(r[i]) for r in rows if len(r) > i + 1), default=0) for i in range(columns)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)), r[-1]]) for r in rows]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _si(value: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g} "
