"""Human-readable text for verdicts (the CLI's default output)."""

from __future__ import annotations

import json

from ksci.evaluate.results import CompileResult, Timing, Verdict
from ksci.problem.spec import shape_key
from ksci.report.wording import SIMULATED, SIMULATED_NOTE, any_simulated, gain


def format_verdict(verdict: Verdict) -> str:
    lines = [f"{verdict.problem} [{verdict.target}]: {verdict.status}"]
    if verdict.message:
        lines.append(f"  {verdict.message}")
    if verdict.compile:
        lines.extend(_compile_lines(verdict.compile))
    failed = [c for c in verdict.checks if not c.ok]
    if verdict.checks:
        lines.append(f"  correctness: {len(verdict.checks) - len(failed)} of {len(verdict.checks)} input sets passed")
    if held_out := verdict.fingerprint.get("held_out"):  # the command line's own output; prompts never show them
        lines.append(f"  held-out shapes (not listed): {', '.join(shape_key(s) for s in held_out)}")
    for check in failed:
        lines.append(f"  FAILED on {shape_key(check.shape)} seed {check.seed}:")
        lines.extend(f"    {line}" for line in check.report.splitlines())
    if verdict.timings:
        lines.append(_timing_table(verdict))
    if verdict.fingerprint.get("gpu"):
        f = verdict.fingerprint
        lines.append(f"  on {f['gpu']} ({f.get('gpu_arch')}), torch {f.get('torch')}, driver {f.get('driver')}")
    return "\n".join(lines)


def _compile_lines(c: CompileResult) -> list[str]:
    """What the compiler did, in words that match the outcome, and each kernel's resources by its whole name."""
    if not c.command:  # refused before any compiler ran (the screen, or a source that could not be converted)
        return []
    cached = " (the result cached from an earlier build)" if c.cached else ""
    if c.ok:
        lines = [f"  compiled for {c.arch} in {c.seconds:.1f} s{cached}: {c.toolchain}"]
    elif c.rejected:  # built, then the library check refused what it imports or runs at load time
        lines = [f"  compiled for {c.arch} in {c.seconds:.1f} s{cached}, then refused: {c.toolchain}"]
    else:
        lines = [f"  compile failed for {c.arch} after {c.seconds:.1f} s{cached}: {c.toolchain}"]
    for k in c.resources:
        lines.append(
            f"    {k.name}: registers {k.registers}, spills {k.spill_bytes} B, "
            f"shared/LDS {k.shared_bytes} B, stack/scratch {k.stack_or_scratch_bytes} B"
        )
    return lines


def _timing_table(verdict: Verdict) -> str:
    header = f"  {'shape':>18s} {'kernel us':>10s} {'spread':>7s} {'reference':>10s} {'vendor':>9s} {'SOL':>8s}"
    rows = [header]
    for s in verdict.timings:
        spread = f"{100 * s.kernel.spread:.1f}%" if s.kernel else "-"
        rows.append(
            f"  {shape_key(s.shape):>18s} {_us(s.kernel):>10s} {spread:>7s} {_us(s.reference):>10s} "
            f"{_us(s.vendor):>9s} {_num(s.speed_of_light_us):>8s}"
        )
    rows.append(
        f"  {'geomean':>18s} {_num(verdict.geomean_us):>10s} {'':>7s} {_num(verdict.reference_geomean_us):>10s} "
        f"{_num(verdict.vendor_geomean_us):>9s} {_num(verdict.speed_of_light_geomean_us):>8s}"
    )
    ratios = []
    if verdict.speedup_vs_reference:
        ratios.append(f"{verdict.speedup_vs_reference:.2f}x the reference")
    if verdict.speedup_vs_vendor:
        ratios.append(f"{verdict.speedup_vs_vendor:.2f}x the vendor library")
    if ratios:
        rows.append("  speed: " + ", ".join(ratios) + " (ratio of geomeans; above 1 is faster)")
    return "\n".join(rows)


def _us(t: Timing | None) -> str:
    return f"{t.median_us:.2f}" if t else "-"


def _num(x: float | None) -> str:
    return f"{x:.2f}" if x else "-"


def format_evolution(summaries: list[dict], store_root: str) -> str:
    """The end-of-run table: per generation, what ran, its own best and the run's best so far, and what was
    compiled and timed anew or taken from the cache; then the best kernel. In a simulated
    run a first line says what its numbers are, the table's times carry "(sim)" and the best's line starts with
    "simulated"."""
    sim = any_simulated(r for s in summaries for r in s["rows"])
    width = 14  # room for "best so far us" and "1000.00 (sim)"
    lines = [SIMULATED_NOTE] if sim else []
    lines.append(
        f"{'gen':>4s} {'cands':>5s} {'ok':>3s} {'gen best us':>{width}s} {'best so far us':>{width}s} "
        f"{'compiles new/cached':>19s} {'timings new/cached':>18s}"
    )
    best = None
    for s in summaries:
        ok = [r for r in s["rows"] if r["status"] == "ok" and r.get("geomean_us")]
        gen_best = min(ok, key=lambda r: r["geomean_us"]) if ok else None
        if gen_best and (best is None or gen_best["geomean_us"] < best["geomean_us"]):
            best = gen_best
        mark = " (sim)" if sim else ""
        shown = _num(gen_best and gen_best["geomean_us"]) + (mark if gen_best else "")
        so_far = _num(best and best["geomean_us"]) + (mark if best else "")
        compiles = f"{s['compiled']}/{s['compile_cache_hits']}"
        timings = f"{s['benchmarked']}/{s['benchmark_cache_hits']}"
        lines.append(
            f"{s['generation']:>4d} {s['candidates']:>5d} {len(ok):>3d} {shown:>{width}s} {so_far:>{width}s} "
            f"{compiles:>19s} {timings:>18s}"
        )
    # What a generation could not do (a spent budget, plans lost to an endpoint that did not answer).
    lines += [f"  generation {s['generation']}: {s['note']}" for s in summaries if s.get("note")]
    if best is None:
        return "\n".join([*lines, "no candidate passed"])
    run = summaries[-1]["run"]
    lines += [
        f"run {run}: best {best['candidate_id']} ({_origin(best)})",
        f"  {SIMULATED + ' ' if sim else ''}geomean {best['geomean_us']:.2f} us; {_baselines(best)}",
        f"  source: {store_root}/{best['source_path']}",
    ]
    return "\n".join(lines)


def _baselines(best: dict) -> str:
    """The baselines' times and the best's gains on them, in the one convention (ksci.report.wording.gain)."""
    parts = [
        f"{name} {_num(best.get(column))} us"
        for name, column in (("reference", "reference_geomean_us"), ("vendor", "vendor_geomean_us"))
    ]
    gains = [
        f"{gain(best[ratio])} than the {name}"
        for name, ratio in (("reference", "speedup_vs_reference"), ("vendor library", "speedup_vs_vendor"))
        if best.get(ratio)
    ]
    return "; ".join(parts + ([", ".join(gains)] if gains else []))


def _origin(row: dict) -> str:
    """Where a candidate came from: its template point, its points by shape, or (LLM-written kernels have none) its
    proposer."""
    if row.get("params_by_shape_json"):
        plan = json.loads(row["params_by_shape_json"])
        points = {json.dumps(p, sort_keys=True) for p in [plan["default"], *plan["shapes"].values()]}
        return f"composed of {len(points)} points by shape"
    if row.get("template"):
        return f"{row['template']} {row.get('params_json') or ''}".strip()
    return f"written by {row.get('llm_model') or row.get('proposer') or 'an unknown proposer'}"
