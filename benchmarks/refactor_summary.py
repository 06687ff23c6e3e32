"""The table of benchmarks/refactor_check.sh: the same runs before and after the refactoring, side by side.

Reads the Parquet parts of each store directly (pandas + pyarrow), not through ksci, so that it reads what either
tree wrote in the same way; the wall times come from the logs' "== LABEL: exit RC after S s" lines.

    python benchmarks/refactor_summary.py OUT
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

KEY = ["run", "candidate_id", "generation"]


def rows_of(store: Path) -> pd.DataFrame:
    parts = sorted(store.glob("*/candidates/part-*.parquet"))
    if not parts:
        return pd.DataFrame(columns=[*KEY, "status", "geomean_us", "vendor_geomean_us"])
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def wall_times(out: Path) -> dict[str, tuple[int, float]]:
    times = {}
    for log in out.glob("*.log"):
        for match in re.finditer(r"^== (\S+): exit (\d+) after ([\d.]+) s", log.read_text(errors="replace"), re.M):
            times[match.group(1)] = (int(match.group(2)), float(match.group(3)))
    return times


def line(label: str, rows: pd.DataFrame, timing: tuple[int, float] | None) -> dict:
    ok = rows[rows["status"] == "ok"]
    best = ok.sort_values("geomean_us").head(1)
    return {
        "run": label,
        "exit": timing[0] if timing else None,
        "wall_s": round(timing[1], 1) if timing else None,
        "candidates": len(rows),
        "duplicate_rows": int(rows.duplicated(KEY).sum()),
        "verdicts": ", ".join(f"{s} {n}" for s, n in rows["status"].value_counts().items()),
        "best_us": round(float(best["geomean_us"].iloc[0]), 2) if len(best) else None,
        "best_vs_vendor": round(float(best["geomean_us"].iloc[0] / best["vendor_geomean_us"].iloc[0]), 3)
        if len(best) and pd.notna(best["vendor_geomean_us"].iloc[0])
        else None,
    }


def main(out: Path) -> int:
    times = wall_times(out)
    stores = out / "stores"
    table = [
        line(f"tuning-{side}", rows_of(stores / side), times.get(f"tuning-{side}")) for side in ("before", "after")
    ]
    table += [
        line(f"llm-{side}", rows_of(stores / f"{side}-llm"), times.get(f"llm-{side}")) for side in ("before", "after")
    ]
    continued = rows_of(stores / "continued")
    table.append(line("continued (before: gens 0-1, after: to 3)", continued, times.get("continued-after")))
    pd.set_option("display.width", 250, "display.max_colwidth", 80)
    print(pd.DataFrame(table).to_string(index=False))
    by_generation = continued.groupby("generation").size().to_dict() if len(continued) else {}
    print(
        f"\ncontinued run: rows per generation {by_generation}; rows written twice: {continued.duplicated(KEY).sum()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
