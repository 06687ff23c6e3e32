"""What a generation shows in the Prefect UI, as plain data: its candidates' table rows and a markdown summary
(flows/artifacts.py publishes them as Prefect artifacts)."""

from __future__ import annotations

import re

COLUMNS = (
    "candidate_id",
    "template",
    "params_json",
    "status",
    "geomean_us",
    "speedup_vs_reference",
    "speedup_vs_vendor",
    "hypothesis",
)


def table_rows(rows: list[dict]) -> list[dict]:
    """The generation's candidates as the table's rows: COLUMNS only, floats rounded, None empty."""
    return [{c: _cell(row.get(c)) for c in COLUMNS} for row in rows]


def generation_markdown(run: str, generation: int, rows: list[dict], store_root: str) -> str:
    ok = [r for r in rows if r["status"] == "ok" and r.get("geomean_us")]
    best = min(ok, key=lambda r: r["geomean_us"]) if ok else None
    lines = [
        f"# {run}: generation {generation}",
        "",
        f"{len(rows)} candidates: {len(ok)} ok, {len(rows) - len(ok)} failed.",
    ]
    if best:
        lines += [
            "",
            f"Best of this generation: `{best['candidate_id']}` ({best['template']} {best['params_json']})",
            f"- geomean {best['geomean_us']:.2f} us",
            f"- {_x(best.get('speedup_vs_reference'))} the reference, {_x(best.get('speedup_vs_vendor'))} "
            "the vendor library",
            f"- source: `{store_root}/{best['source_path']}`",
        ]
    lines += [
        "",
        f"The whole run as one HTML page (plots, lineage, diffs): `ksci report --run {run} --store {store_root}`; "
        f"in a terminal: `ksci status --run {run} --store {store_root}`.",
    ]
    return "\n".join(lines)


def _x(value) -> str:
    return f"{value:.2f}x" if value else "n/a x"


def _cell(value):
    return round(value, 3) if isinstance(value, float) else ("" if value is None else value)


def artifact_key(text: str) -> str:
    """Artifact keys allow lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
