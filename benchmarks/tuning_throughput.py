"""Candidates per hour of a tuning evolution on one GPU, and where each candidate's GPU time goes (issue 28).

Runs `ksci evolve --proposer tuning` from scratch on GPU 0 (a fresh compile cache, Prefect home and store, so
nothing is reused), from this checkout or from another one (`--tree`: an older commit's files, for a before/after
on the same machine), then reads the run's lineage with this checkout's code and prints one row per run:

- candidates, those that reached the GPU, the process's wall time and candidates per hour over it (Prefect's and
  the harnesses' start included), and over the GPU span (the first GPU window's start to the last one's end); the
  process's seconds before and after the span; the Prefect home's database is created before the run, as
  `make setup` creates ksci's (`--fresh-prefect-db`: inside the run, as before 2026-11-26's sixth session);
- per candidate, the medians of its GPU windows as the parent recorded them: verify, benchmark (one window of
  both since a candidate is verified and timed in one harness run), and the harness start-up inside each (go-ahead
  to the child's "started": the GPU context); the GPU seconds per candidate; the
  baseline runs (once per generation since issue 28; before it, inside every benchmark);
- the share of the GPU span the GPU was busy, and the best row's geomean and vendor ratio as the lineage has them
  (the run's own measurements: benchmarks/evolution_result.py times the best again beside cuBLASLt).

    python benchmarks/tuning_throughput.py --label after --candidates 40 --race --save after.json
    python benchmarks/tuning_throughput.py --label before --tree ../before --candidates 40 --save before.json
    python benchmarks/tuning_throughput.py --show before.json after.json

`--deadline SECONDS` stops the run with SIGTERM once it has run that long (ksci evolve then stops cleanly and keeps
every verdict recorded; a run overshoots `--minutes` by the generations still running) and reports what the lineage
holds, its row marked "cut": a device call's own timeout would instead lose the whole table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ksci.lineage.store import LineageStore

HERE = Path(__file__).resolve().parent.parent
STOP_WAIT_S = 30.0  # after --deadline's SIGTERM, how long the run may take to stop before it is killed


def prefect_database(env: dict, fresh: bool) -> float | None:
    """Create and migrate the Prefect home's database before the timed run, as `make setup` does for ksci's own
    (data/prefect), so that the run starts as a user's `ksci evolve` does after set-up; its seconds are reported
    apart. None when `fresh` (the run then creates it itself, inside its time, as before)."""
    if fresh:
        return None
    started = time.monotonic()
    prefect = [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"]
    subprocess.run(prefect, env=env, check=True, capture_output=True)
    return time.monotonic() - started


def evolve(args, work: Path) -> dict:
    """Run the evolution; its wall time, run, store, the Prefect database's set-up seconds and the process's start
    and end on the clock of the GPU windows (time.time)."""
    tree = (args.tree or HERE).resolve()
    store, run = work / "store", f"throughput-{args.label}"
    env = dict(os.environ, KSCI_COMPILE_CACHE=str(work / "cache"), PREFECT_HOME=str(work / "prefect"))
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    database_s = prefect_database(env, args.fresh_prefect_db)
    command = [sys.executable, "-m", "ksci.cli", "evolve", "--problem", args.problem, "--target", "cuda"]
    command += ["--proposer", "tuning", "--gpus", "0", "--generations", "1000", "--children", str(args.children)]
    command += ["--max-candidates", str(args.candidates), "--run", run, "--store", str(store), "--no-profile"]
    command += ["--quiet", "--overlap", str(args.overlap), *(["--race"] if args.race else [])]
    command += ["--time-limit", str(args.minutes)] if args.minutes else []
    command += ["--simulate"] if args.simulate else []
    began, started = time.time(), time.monotonic()
    child = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cut = False
    try:
        out, err = child.communicate(timeout=args.deadline)
    except subprocess.TimeoutExpired:
        cut = True  # ksci evolve stops cleanly on SIGTERM (ksci.console.stop) and exits 143
        child.send_signal(signal.SIGTERM)
        try:
            out, err = child.communicate(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
    wall = time.monotonic() - started
    if child.returncode != 0 and not cut:
        print(out[-3000:], err[-3000:], sep="\n")
        raise SystemExit(f"{args.label}: ksci evolve exited {child.returncode}")
    ended = time.time()
    return {
        "wall": wall,
        "run": run,
        "store": store,
        "database_s": database_s,
        "began": began,
        "ended": ended,
        "cut": cut,
    }


def windows_of(rows) -> dict:
    """Per kind (verify, benchmark, baselines): the GPU windows the parent recorded, each (start, end, start-up s,
    seconds after the child's result inside the window, seconds its exit went on after the window: a run that
    handed its GPU over at its result, ksci.devices.Lease), the last three None where not recorded. A generation's
    baseline window is named by every row that took it, so it is counted once. A candidate verified and timed in
    one harness run (since the twentieth session of issue 28) has one window, of kind `verify+benchmark`; before,
    each row had a verify window (`verify_gpu_window`) and a benchmark window."""
    kinds: dict[str, dict] = {"verify": {}, "benchmark": {}, "verify+benchmark": {}, "baselines": {}}
    for fingerprint in rows["fingerprint_json"].map(json.loads):
        for key, kind in (("verify_gpu_window", "verify"), ("gpu_window", "benchmark"), ("baselines_gpu_window", "baselines")):  # fmt: skip
            w = fingerprint.get(key)
            if kind == "benchmark" and w and "verify" in w.get("phases", ()):
                kind = "verify+benchmark"
            if w and "start" in w:
                exit_s = w["end"] - w["start"] - w["result_s"] if "result_s" in w else None
                beyond = w["start"] + w["exited_s"] - w["end"] if "exited_s" in w else None
                kinds[kind][(w["start"], w["end"])] = (w.get("started_s"), exit_s, beyond)
    return {kind: [(a, b, *s) for (a, b), s in found.items()] for kind, found in kinds.items()}


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summary(args, process: dict, rows) -> dict:
    windows = windows_of(rows)
    every = [w for ws in windows.values() for w in ws]
    first, last = (min(w[0] for w in every), max(w[1] for w in every)) if every else (None, None)
    span = last - first if every else 0.0
    busy = sum(w[1] - w[0] for w in every)
    on_gpu = len(windows["verify"]) + len(windows["verify+benchmark"])
    ok = rows[rows["status"] == "ok"].sort_values("geomean_us")
    best = ok.iloc[0] if len(ok) else None
    return {
        "label": args.label + (f" (cut at {args.deadline:.0f} s)" if process.get("cut") else ""),
        "tree": str(args.tree or "this checkout"),
        "race": args.race,
        "overlap": args.overlap,
        "children": args.children,
        "candidates": len(rows),
        "on_gpu": on_gpu,
        "wall_s": process["wall"],
        "span_s": span,
        # The process's seconds outside the GPU span: before the first GPU window (Python, Prefect's API, the first
        # compiles) and after the last one; and the Prefect database's set-up before the run (None: inside it).
        "lead_in_s": None if first is None else first - process["began"],
        "tail_s": None if last is None else process["ended"] - last,
        "prefect_db_s": process["database_s"],
        "busy_s": busy,
        "medians_s": {kind: _median([w[1] - w[0] for w in ws]) for kind, ws in windows.items()},
        "startup_s": {kind: _median([w[2] for w in ws]) for kind, ws in windows.items()},
        "exit_s": {kind: _median([w[3] for w in ws]) for kind, ws in windows.items()},
        "exit_beyond_s": {kind: _median([w[4] for w in ws]) for kind, ws in windows.items()},
        "baseline_runs": len(windows["baselines"]),
        "best_us": None if best is None else float(best["geomean_us"]),
        "best_vs_vendor": None if best is None else float(best["speedup_vs_vendor"] or 0) or None,
    }


def _s(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(results: list[dict]) -> None:
    print(
        "| run | race | overlap | candidates | on a GPU | process s | per hour | GPU span s | per hour over the span "
        "| GPU busy | verify window s | benchmark window s | start-up in verify / benchmark s "
        "| after the result in verify / benchmark s | exit after the window verify / benchmark s "
        "| one window (verify and benchmark) s: whole / start-up / after the result / exit after it "
        "| baseline runs (median s) | GPU s per candidate "
        "| best us (lineage) | vendor / best | before / after the GPU span s | Prefect database set-up s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|---:|---:|---:|---|---|")
    unknown = {"verify": None, "benchmark": None, "verify+benchmark": None}
    for r in results:
        m, up, down = r["medians_s"], r["startup_s"], r.get("exit_s") or unknown
        beyond = r.get("exit_beyond_s") or unknown
        print(
            f"| {r['label']} | {'yes' if r['race'] else 'no'} | {r['overlap']} | {r['candidates']} | {r['on_gpu']} "
            f"| {r['wall_s']:.0f} | {3600 * r['candidates'] / r['wall_s']:.0f} | {r['span_s']:.0f} "
            f"| {3600 * r['on_gpu'] / r['span_s'] if r['span_s'] else 0:.0f} "
            f"| {100 * r['busy_s'] / r['span_s'] if r['span_s'] else 0:.0f}% | {_s(m['verify'])} | {_s(m['benchmark'])} "
            f"| {_s(up['verify'])} / {_s(up['benchmark'])} | {_s(down['verify'])} / {_s(down['benchmark'])} "
            f"| {_s(beyond['verify'])} / {_s(beyond['benchmark'])} "
            f"| {_one_window(m, up, down, beyond)} "
            f"| {r['baseline_runs']} ({_s(m['baselines'])}) "
            f"| {r['busy_s'] / r['on_gpu'] if r['on_gpu'] else 0:.2f} | {_s(r['best_us'])} | {_s(r['best_vs_vendor'])} "
            f"| {_s(r.get('lead_in_s'))} / {_s(r.get('tail_s'))} | {_database(r)} |"
        )


def _one_window(medians: dict, startup: dict, after: dict, beyond: dict) -> str:
    """The one-window columns of a row; rows saved before there was such a window have none."""
    kind = "verify+benchmark"
    if medians.get(kind) is None:
        return "-"
    return " / ".join(_s(d.get(kind)) for d in (medians, startup, after, beyond))


def _database(row: dict) -> str:
    """Rows saved before the column existed created the database inside the run, as --fresh-prefect-db does."""
    seconds = row.get("prefect_db_s")
    return "in the run" if seconds is None else f"{seconds:.1f} before the run"


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fp8_gemm_kmajor")
    parser.add_argument("--label", default="this")
    parser.add_argument("--tree", type=Path, help="run ksci from this checkout (default: this one)")
    parser.add_argument("--candidates", type=int, default=40, help="--max-candidates of the run")
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--overlap", type=int, default=0)
    parser.add_argument("--race", action="store_true")
    parser.add_argument("--minutes", type=float, help="--time-limit of the run")
    parser.add_argument(
        "--deadline", type=float, help="stop the run (SIGTERM) after this many seconds and report what it recorded"
    )
    parser.add_argument("--simulate", action="store_true", help="made-up timings, to try the script on a CPU")
    parser.add_argument(
        "--fresh-prefect-db",
        action="store_true",
        help="let the run create its Prefect database itself, inside its time (default: before it, as make setup does)",
    )
    parser.add_argument("--keep", type=Path, help="keep the run's store and logs here (default: a temporary folder)")
    parser.add_argument("--save", type=Path, help="add this run's row to this JSON file")
    parser.add_argument("--show", type=Path, nargs="+", help="print the table of saved rows; run nothing")
    args = parser.parse_args()
    if args.show:
        return print_table([r for path in args.show for r in json.loads(path.read_text())])
    with tempfile.TemporaryDirectory(prefix="ksci-throughput-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        process = evolve(args, work)
        result = summary(args, process, LineageStore(process["store"]).read(process["run"]))
    if args.save:
        saved = json.loads(args.save.read_text()) if args.save.exists() else []
        args.save.write_text(json.dumps([*saved, result], indent=1))
    print_table([result])


if __name__ == "__main__":
    main()
