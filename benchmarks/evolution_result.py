"""What an evolution earned: its best kernel of generation 0 and its best kernel overall, timed again beside the
vendor library, per shape. For issue 17's check (a tuning-only run from scratch against cuBLASLt). Usage, on a GPU:

    python benchmarks/evolution_result.py --store data/runs --run RUN [--json-out FILE]

Reads the run's lineage: how many candidates, their verdicts (and every compile error's message, so that a
constraint-violating point would show), the best `ok` kernel of generation 0 and the best `ok` kernel of any
generation (a composed kernel with its points: the default's, and each shape's changes to it). Both are evaluated
again through ksci's harness (screen, library check, verification, timing with
fresh inputs per call), each with the reference and the vendor library timed in the same harness process, and one
table is printed: per benchmark shape, the best seed, the best evolved kernel, the vendor library, the speed of
light and the evolved kernel's and the vendor's share of it (% SoL); then the geomeans and the ratios. The numbers
are this script's measurements, not the lineage's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status, Verdict, geomean
from ksci.evaluate.stage_order import evaluate_source
from ksci.lineage.store import LineageStore
from ksci.problem.spec import load_problem, shape_key


def _describe(row) -> str:
    if row["kind"] == "composed":
        plan = json.loads(row["params_by_shape_json"])
        points = {json.dumps(p, sort_keys=True) for p in [plan["default"], *plan["shapes"].values()]}
        return f"composed of {len(points)} points"
    return f"{row['template']} {row['params_json']}"


def _plan(row) -> dict | None:
    """A composed kernel's points: the default's, then each shape's as its differences from the default."""
    if row["kind"] != "composed":
        return None
    plan = json.loads(row["params_by_shape_json"])
    default = plan["default"]
    shapes = {}
    for shape, point in plan["shapes"].items():
        if point["template"] != default["template"]:
            shapes[shape] = point
        else:
            shapes[shape] = {k: v for k, v in point["params"].items() if default["params"].get(k) != v}
    return {"default": default, "shapes": shapes}


def _pct(part: float | None, whole: float) -> float:
    """part as a percentage of whole (the speed of light's time over a kernel's: its share of the peak)."""
    return 100.0 * part / whole if part and whole == whole and whole > 0 else float("nan")


def table(seed_v: Verdict, best_v: Verdict) -> tuple[list[str], dict, float]:
    """The per-shape table of the seed's and the evolved kernel's times beside the vendor's (timed in the evolved
    kernel's harness process) and the speed of light, with the evolved kernel's and the vendor's share of it (% SoL:
    the speed of light's time over theirs); its lines, the per-shape record and the vendor's geomean."""
    lines = [
        f"{'shape':18s}{'best seed':>11s}{'evolved':>10s}{'vendor':>10s}{'SoL':>8s}"
        f"{'evolved % SoL':>15s}{'vendor % SoL':>14s}{'evolved/vendor':>16s}"
    ]
    per_shape = {}
    for s, e in zip(seed_v.timings, best_v.timings, strict=True):
        vendor = e.vendor.median_us if e.vendor else float("nan")
        key = shape_key(e.shape)
        sol = e.speed_of_light_us
        per_shape[key] = {
            "seed": s.kernel.median_us,
            "evolved": e.kernel.median_us,
            "vendor": vendor,
            "sol": sol,
            "evolved_pct_sol": _pct(sol, e.kernel.median_us),
            "vendor_pct_sol": _pct(sol, vendor),
        }
        lines.append(
            f"{key:18s}{s.kernel.median_us:11.2f}{e.kernel.median_us:10.2f}{vendor:10.2f}{sol or float('nan'):8.2f}"
            f"{_pct(sol, e.kernel.median_us):15.1f}{_pct(sol, vendor):14.1f}{e.kernel.median_us / vendor:16.2f}"
        )
    vendor_geo = geomean([v["vendor"] for v in per_shape.values()])
    sol_geo = best_v.speed_of_light_geomean_us
    lines.append(
        f"{'geomean':18s}{seed_v.geomean_us:11.2f}{best_v.geomean_us:10.2f}{vendor_geo:10.2f}"
        f"{sol_geo or float('nan'):8.2f}{_pct(sol_geo, best_v.geomean_us):15.1f}{_pct(sol_geo, vendor_geo):14.1f}"
        f"{best_v.geomean_us / vendor_geo:16.2f}"
    )
    lines.append(
        f"evolved vs vendor: {best_v.geomean_us / vendor_geo:.3f}x the vendor's time; "
        f"evolved vs best seed: {seed_v.geomean_us / best_v.geomean_us:.3f}x faster"
    )
    return lines, per_shape, vendor_geo


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", default="data/runs")
    parser.add_argument("--run", required=True)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    store = LineageStore(args.store)
    rows = store.read(args.run)
    if rows.empty:
        known = ", ".join(store.runs()) or "none"
        raise SystemExit(f"no candidates of run {args.run!r} in {args.store} (runs there: {known})")
    problem = load_problem(rows["problem"].iloc[0])
    target = rows["target"].iloc[0]
    print(f"run {args.run}: {len(rows)} candidates over {rows['generation'].max() + 1} generations of {problem.name}")
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in rows["status"].value_counts().items()))
    for _, row in rows[rows["status"] == str(Status.COMPILE_ERROR)].iterrows():
        print(f"  compile_error gen {row['generation']} {_describe(row)}: {row['message'][:160]}")
    ok = rows[rows["status"] == str(Status.OK)]
    first = ok[ok["generation"] == 0]
    if first.empty:
        raise SystemExit(f"run {args.run} has no ok kernel in generation 0: nothing to compare the best with")
    seed = first.sort_values("geomean_us").iloc[0]
    best = ok.sort_values("geomean_us").iloc[0]
    print(f"best of generation 0: {seed['candidate_id']} {_describe(seed)}: {seed['geomean_us']:.2f} us (lineage)")
    print(
        f"best overall: {best['candidate_id']} gen {best['generation']} {_describe(best)}: {best['geomean_us']:.2f} us"
    )

    plan = _plan(best)
    if plan is not None:
        print(f"  its default: {plan['default']['template']} {json.dumps(plan['default']['params'], sort_keys=True)}")
        for shape, change in sorted(plan["shapes"].items()):
            print(f"  {shape}: {json.dumps(change, sort_keys=True)}")

    options = EvaluationOptions(target=target)
    verdicts = {}
    for label, row in (("seed", seed), ("evolved", best)):
        verdicts[label] = evaluate_source(problem, store.read_source(row["source_path"]), options)
        print(f"{label}: {verdicts[label].status} {verdicts[label].message[:120]}", flush=True)
    if any(v.status != Status.OK for v in verdicts.values()):
        raise SystemExit("a kernel was not ok when timed again: no table")

    seed_v, best_v = verdicts["seed"], verdicts["evolved"]
    gpu = best_v.fingerprint.get("gpu")
    print(f"\n{problem.name} on {gpu}, us (median per shape; vendor timed in the evolved kernel's harness process)")
    lines, per_shape, vendor_geo = table(seed_v, best_v)
    print("\n".join(lines))
    if args.json_out:
        record = {
            "run": args.run,
            "problem": problem.name,
            "candidates": len(rows),
            "statuses": rows["status"].value_counts().to_dict(),
            "seed": {"id": seed["candidate_id"], "what": _describe(seed), "geomean_us": seed_v.geomean_us},
            "evolved": {
                "id": best["candidate_id"],
                "what": _describe(best),
                "plan": plan,
                "geomean_us": best_v.geomean_us,
            },
            "vendor_geomean_us": vendor_geo,
            "per_shape": per_shape,
            "fingerprint": best_v.fingerprint,
        }
        args.json_out.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
