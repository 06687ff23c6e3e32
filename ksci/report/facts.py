"""What a run did, read from its lineage frame: the fastest candidates, the best so far per generation, the
experiments that beat their parent, and the short forms of ids, parameters and messages that the page, the plots
and `ksci status` all print.

Pure functions over the frame that `LineageStore.read(run)` returns (pandas only, no matplotlib), so `ksci status`
does not load a plotting library.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from ksci.evaluate.results import Status
from ksci.problem.contract import hide_held_out
from ksci.report.wording import any_simulated, gain

STATUS_ORDER = [str(s) for s in Status]
STATUS_COLOURS = {  # one colour per status in the plots, the lineage graph and the table
    "ok": "#2e7d32",
    "suspicious": "#8e24aa",
    "wrong": "#ef6c00",
    "timeout": "#6d4c41",
    "runtime_error": "#c62828",
    "load_error": "#ad1457",
    "compile_error": "#9e9e9e",
    "rejected": "#424242",
    "compiled": "#1565c0",
}


def timed(frame: pd.DataFrame) -> pd.DataFrame:
    """The candidates that passed and have a time, fastest first."""
    ok = frame[(frame["status"] == "ok") & frame["geomean_us"].notna()]
    return ok.sort_values(["geomean_us", "candidate_id"], kind="stable")


def by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    """Each candidate's first row (a kernel proposed again in a later generation keeps its first record)."""
    return {row["candidate_id"]: row for _, row in frame.iloc[::-1].iterrows()}


def generation_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per generation: candidates, a count per status, the generation's best and the best so far."""
    rows, best = [], None
    for generation, group in frame.groupby("generation", sort=True):
        fastest = timed(group)
        gen_best = fastest.iloc[0] if not fastest.empty else None
        if gen_best is not None and (best is None or gen_best["geomean_us"] < best["geomean_us"]):
            best = gen_best
        rows.append(
            {
                "generation": int(generation),
                "candidates": len(group),
                **group["status"].value_counts().to_dict(),
                "best_us": None if gen_best is None else gen_best["geomean_us"],
                "best_id": None if gen_best is None else gen_best["candidate_id"],
                "best_so_far_us": None if best is None else best["geomean_us"],
                "best_so_far_id": None if best is None else best["candidate_id"],
            }
        )
    return pd.DataFrame(rows)


def new_bests(frame: pd.DataFrame) -> list[pd.Series]:
    """The candidates that lowered the best-so-far after the seeds (at most one per generation)."""
    summary, rows = generation_summary(frame), by_id(frame)
    previous = summary["best_so_far_id"].shift(1)
    changed = summary[(summary["generation"] > 0) & summary["best_so_far_id"].notna()]
    changed = changed[changed["best_so_far_id"] != previous[changed.index]]
    return [rows[cid] for cid in changed["best_so_far_id"]]


def faster_than_parent(frame: pd.DataFrame) -> list[pd.Series]:
    """Children that passed and beat their (passing) parent: the experiments that worked."""
    rows, found = by_id(frame), []
    for _, row in timed(frame).sort_values(["generation", "geomean_us"]).iterrows():
        parent = rows.get(row["parent_id"]) if isinstance(row["parent_id"], str) else None
        if parent is not None and pd.notna(parent["geomean_us"]) and row["geomean_us"] < parent["geomean_us"]:
            found.append(row)
    return found


def ancestry(frame: pd.DataFrame, candidate_id: str) -> list[pd.Series]:
    """The chain of parents from a seed down to this candidate."""
    rows, chain = by_id(frame), []
    while isinstance(candidate_id, str) and candidate_id in rows and len(chain) < len(rows):
        chain.append(rows[candidate_id])
        candidate_id = rows[candidate_id]["parent_id"]
    return chain[::-1]


def baseline(frame: pd.DataFrame, column: str) -> float | None:
    """A baseline's geomean over the run (it is re-timed beside every candidate; the median is robust)."""
    values = frame[column].dropna()
    return float(values.median()) if not values.empty else None


def noise(frame: pd.DataFrame) -> float | None:
    """Run-to-run spread of the reference's geomean, (max - min) / median: smaller differences are noise."""
    values = frame["reference_geomean_us"].dropna()
    return float((values.max() - values.min()) / values.median()) if len(values) > 1 else None


def short_id(candidate_id: str) -> str:
    return candidate_id[:8]


def composition(row: pd.Series) -> dict | None:
    """A composed candidate's plan (ksci.problem.compose), or None for every other row (and rows of old lineages)."""
    text = row.get("params_by_shape_json")
    return json.loads(text) if isinstance(text, str) else None


def family(row: pd.Series) -> str:
    """What the candidate is made of: its template, "composed of N points", or nothing for a free-form kernel."""
    plan = composition(row)
    if plan is not None:
        return f"composed of {len(variant_labels(plan))} points"
    return row["template"] if isinstance(row["template"], str) else ""


def describe(row: pd.Series) -> str:
    """The family and the parameters, in one phrase."""
    return " ".join(part for part in (family(row), short_params(row["params_json"])) if part)


def variant_labels(plan: dict) -> list[str]:
    """A composed plan's distinct points as "template params", the default first."""
    points = [plan["default"], *plan["shapes"].values()]
    return list(dict.fromkeys(f"{p['template']} {short_params(json.dumps(p['params']))}" for p in points))


def short_params(params_json) -> str:
    if not isinstance(params_json, str):
        return ""
    return " ".join(f"{k}={v}" for k, v in json.loads(params_json).items())


def short_hypothesis(text: str, width: int = 40) -> str:
    """The hypothesis without its bracketed provenance, cut to `width` characters."""
    text = re.split(r" \((?:neighbour|parent)", text or "")[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def short_message(text: str) -> str:
    """The message with absolute paths (compile-cache temp folders) cut down to the file name, and held-out shapes
    hidden (ksci.problem.contract.hide_held_out)."""
    return hide_held_out(re.sub(r"(?<![\w.])/\S*/", "", text or ""))


def headline_facts(frame: pd.DataFrame) -> dict | None:
    """Best kernel, its ratios, and how far it moved from the seeds; None when nothing passed."""
    fastest = timed(frame)
    if fastest.empty:
        return None
    best = fastest.iloc[0]
    seeds = timed(frame[frame["generation"] == frame["generation"].min()])
    sol = best["speed_of_light_geomean_us"]
    return {
        "best": best,
        "best_seed": seeds.iloc[0] if not seeds.empty else None,
        "slowest_seed": seeds.iloc[-1] if not seeds.empty else None,
        "sol_fraction": sol / best["geomean_us"] if pd.notna(sol) else None,
        "chain": ancestry(frame, best["candidate_id"]),
    }


def simulated(frame: pd.DataFrame) -> bool:
    """Whether the run's numbers came from the GPU simulator (ksci.backends.simulated.is_simulated), not a GPU."""
    columns = [c for c in ("gpu", "fingerprint_json") if c in frame.columns]
    return any_simulated(frame[columns].to_dict("records"))


def device(frame: pd.DataFrame) -> str:
    """Where the run was measured: the GPU and architecture (failed rows may lack them), else the target; for a
    simulated run, the simulator and that nothing was measured."""
    if simulated(frame):
        return f"the GPU simulator for {frame['target'].iloc[0]} (simulated timings, not measured)"
    gpus, arches = frame["gpu"].dropna(), frame["arch"].dropna()
    where = gpus.iloc[0] if not gpus.empty else frame["target"].iloc[0]
    return f"{where} ({arches.iloc[0]})" if not arches.empty else where


def times(x: float) -> str:
    """A speed ratio in the one convention of gains (ksci.report.wording.gain): 4.26x faster, or 4.93x slower."""
    return gain(None if x is None or pd.isna(x) else float(x))


def two_decimals(x) -> str:
    """A number to two places, or "-" where there is none."""
    return "-" if x is None or pd.isna(x) else f"{x:.2f}"


def percent(x) -> str:
    """A fraction as a percentage to one place, or "n/a"."""
    return "n/a" if x is None else f"{100 * x:.1f}%"
