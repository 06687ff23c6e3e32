"""Candidates per hour on 1 GPU against N GPUs, and proof that no two candidates ever shared a GPU.

Runs the same evolution (fresh compile cache and Prefect state each time, so nothing is reused) first on GPU 0,
then on every visible GPU, each in its own process, and prints candidates per hour for each, twice: over the
whole process (Python and Prefect start-up included, as `ksci evolve` on a laptop) and over the evolution alone
with Prefect's API already up (as a deployment, whose server runs all the time). From the lineage, it then
checks every GPU's busy windows (verify and benchmark of each candidate, recorded by the parent around each
harness process) for overlaps, how busy the GPUs were between the first window's start and the last one's end,
the median time a harness process took from its go-ahead to its start (the GPU context) before its work, and
whether each GPU index always meant one physical GPU (the UUID each timed harness process reported).
Both runs use the same `--children` and `--overlap` (generations side by side; 0 runs them one after the other).
    python benchmarks/multi_gpu_throughput.py --problem fp8_gemm --generations 3 --children 12 --overlap 1
The same number of generations on N GPUs (the default) compares equal work: the N-GPU run is about N times
shorter, so what every run pays once weighs N times more in it (Prefect's start, the first compiles, the last
candidates timed while other GPUs have nothing left). Candidates per hour
of an evolution that runs for hours is closer to equal time: `--generations-n` gives the N-GPU run more
generations (about N times as many lasts about as long as the 1-GPU run). Later generations may propose other
kernels, so the table also counts the candidates that reached a GPU and the GPU seconds each took.
A device call has a time limit, so the two runs can be split: `--only 1 --save one.json`, then
`--only N --baseline one.json` prints both rows; `--show one.json n.json` prints the table of saved runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ksci.evaluate.run.visibility import visible_gpus
from ksci.lineage.store import LineageStore


def run_once(args, gpus: list[str], work: Path, generations: int) -> dict:
    label = "gpus-" + "-".join(gpus)
    env = dict(os.environ, KSCI_COMPILE_CACHE=str(work / f"cache-{label}"), PREFECT_HOME=str(work / f"prefect-{label}"))
    store = work / f"store-{label}"
    command = [sys.executable, __file__, "--problem", args.problem, "--generations", str(generations)]
    command += ["--children", str(args.children), "--overlap", str(args.overlap)]
    command += ["--_evolve", ",".join(gpus), label, str(store)]
    command += ["--simulate", args.simulate] if args.simulate is not None else []
    log = (args.logs or work) / f"{label}.log"  # written as it goes: a run cut short still shows how far it got
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    lines = log.read_text().splitlines()
    if done.returncode != 0:
        print("\n".join(lines[-40:]))
        raise SystemExit(f"{label}: the evolution failed (log: {log})")
    timed = json.loads(next(line for line in reversed(lines) if line.startswith('{"startup_s"')))
    rows = LineageStore(store).read(label)
    return {
        "label": label,
        "params": params(args, generations),
        "gpus": len(gpus),
        "wall_s": wall,
        "candidates": len(rows),
        "windows": busy_windows(rows),
        "uuids": uuids_by_device(rows),
        "harness_start_s": harness_starts(rows),
        **timed,
    }


def params(args, generations: int) -> dict:
    return {
        "problem": args.problem,
        "generations": generations,
        "children": args.children,
        "overlap": args.overlap,
    }


def evolve_timed(args, gpus: str, run: str, store: str) -> None:
    """In a fresh process: start Prefect's API with an empty flow, then time the evolution alone."""
    from ksci.embedded import configure_prefect

    configure_prefect()
    from prefect import flow

    from flows.evolve import evolve

    started = time.monotonic()
    flow(name="warm-up")(lambda: None)()
    up = time.monotonic()
    evolve(
        problem=args.problem,
        generations=args.generations,
        children=args.children,
        run=run,
        store_root=store,
        gpus=gpus.split(","),
        simulate=args.simulate,
        overlap=args.overlap,
    )
    print(json.dumps({"startup_s": up - started, "evolution_s": time.monotonic() - up}), flush=True)


def gpu_windows(rows):
    """(candidate id, window) for each harness process of each row: verify's and benchmark's, as recorded."""
    for candidate_id, fingerprint in zip(rows["candidate_id"], rows["fingerprint_json"].map(json.loads), strict=True):
        for key in ("verify_gpu_window", "gpu_window"):
            if fingerprint.get(key):
                yield candidate_id, fingerprint[key]


def busy_windows(rows) -> dict[str, list[tuple[float, float, str]]]:
    windows: dict[str, list[tuple[float, float, str]]] = {}
    for candidate_id, w in gpu_windows(rows):
        if "start" in w:  # the simulator records which GPU, not when
            windows.setdefault(str(w["device"]), []).append((w["start"], w["end"], candidate_id))
    return windows


def uuids_by_device(rows) -> dict[str, list[str]]:
    """Per GPU index the harness was given, the physical GPUs (UUIDs) its timed runs reported using."""
    seen: dict[str, set[str]] = {}
    for fingerprint in rows["fingerprint_json"].map(json.loads):
        window = fingerprint.get("gpu_window") or {}
        if fingerprint.get("gpu_uuid") and "device" in window:
            seen.setdefault(str(window["device"]), set()).add(fingerprint["gpu_uuid"])
    return {device: sorted(uuids) for device, uuids in seen.items()}


def pinning(result: dict) -> str:
    """Whether each GPU index always meant one physical GPU, a different one for each index."""
    uuids = result.get("uuids")  # earlier files lack it
    if not uuids:
        return "-"
    held = all(len(u) == 1 for u in uuids.values()) and len({u[0] for u in uuids.values()}) == len(uuids)
    return f"{'held' if held else 'BROKEN'} ({len(uuids)} GPUs, {len({x for u in uuids.values() for x in u})} UUIDs)"


def harness_starts(rows) -> list[float]:
    """Per harness process, seconds from its go-ahead to its "started" report (the GPU context; before the harness
    was started ahead of its GPU, Python and torch too)."""
    return [w["started_s"] for _, w in gpu_windows(rows) if "started_s" in w]


def overlaps(windows: list[tuple[float, float, str]]) -> int:
    ordered = sorted(windows)
    return sum(1 for a, b in zip(ordered, ordered[1:], strict=False) if b[0] < a[1])


def busy_share(windows: dict[str, list]) -> float | None:
    """Busy time over (GPUs x the span from the first window's start to the last one's end)."""
    every = [w for ws in windows.values() for w in ws]
    if not every:
        return None
    span = max(w[1] for w in every) - min(w[0] for w in every)
    return sum(w[1] - w[0] for w in every) / (len(windows) * span) if span > 0 else None


def idle_breakdown(windows: dict[str, list]) -> dict[str, tuple[int, float]] | None:
    """Where the GPUs were idle between the first window's start and the last one's end (as busy_share), as
    (count, GPU seconds): before each GPU's first window and after its last, and the gaps between two windows,
    by length: under 1 s (a hand-off), 1 to 3 s (the length of the Prefect client's retry of a request the API
    answered with 503: 2 s, 20% jitter), 3 s or more (nothing ready to run)."""
    every = [w for ws in windows.values() for w in ws]
    if not every:
        return None
    first, last = min(w[0] for w in every), max(w[1] for w in every)
    kinds = {"start/end": [], "under 1 s": [], "1-3 s": [], "3 s+": []}
    for ws in windows.values():
        ordered = sorted(ws)
        kinds["start/end"] += [ordered[0][0] - first, last - max(w[1] for w in ordered)]
        for a, b in zip(ordered, ordered[1:], strict=False):
            gap = b[0] - a[1]
            kinds["under 1 s" if gap < 1 else "1-3 s" if gap < 3 else "3 s+"].append(gap)
    return {kind: (sum(1 for g in gaps if g > 0), sum(g for g in gaps if g > 0)) for kind, gaps in kinds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--generations-n", type=int, help="generations of the N-GPU run (default: --generations)")
    parser.add_argument("--children", type=int, default=12)
    parser.add_argument("--overlap", type=int, default=1, help="generations side by side (0: one after the other)")
    parser.add_argument("--gpus", help="the GPUs of the N-GPU run (default: every visible GPU)")
    parser.add_argument("--only", choices=("1", "N"), help="run only the 1-GPU or only the N-GPU evolution")
    parser.add_argument("--save", type=Path, help="write the results (JSON) here")
    parser.add_argument("--baseline", type=Path, help="the 1-GPU results of an earlier --save, instead of a run")
    parser.add_argument("--show", type=Path, nargs="+", help="print the table of earlier --save files; run nothing")
    parser.add_argument("--logs", type=Path, help="folder for each evolution's log (default: a temporary one)")
    parser.add_argument("--simulate", help="replay this recording instead of a GPU (to try the script on a CPU)")
    parser.add_argument("--_evolve", nargs=3, metavar=("GPUS", "RUN", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._evolve:
        return evolve_timed(args, *args._evolve)
    if args.show:
        return print_table([r for path in args.show for r in json.loads(path.read_text())], args)
    every = args.gpus.split(",") if args.gpus else visible_gpus("cuda") or visible_gpus("rocm")
    if min(args.generations, args.generations_n or 1) < 1 or args.children < 1:
        raise SystemExit("--generations, --generations-n and --children: expected 1 or more")
    results = json.loads(args.baseline.read_text()) if args.baseline else []
    expected = params(args, args.generations)
    other = [r.get("params", expected) for r in results if r["gpus"] != 1 or r.get("params", expected) != expected]
    if other:
        raise SystemExit(f"{args.baseline}: expected 1-GPU results of {expected}, found {other[0]}: not a pair")
    runs = ([(["0"], args.generations)] if args.only != "N" and not args.baseline else []) + (
        [(every, args.generations_n or args.generations)] if args.only != "1" else []
    )
    with tempfile.TemporaryDirectory(prefix="ksci-throughput-") as tmp:
        for gpus, generations in runs:
            results.append(run_once(args, gpus, Path(tmp), generations))
            if args.save:  # after each run: a later one cut short leaves this one's results
                args.save.write_text(json.dumps(results))
    print_table(results, args)


def on_a_gpu(result: dict) -> int:
    """Candidates that reached a GPU (verified, maybe timed): the others failed to compile, at CPU cost only."""
    return len({w[2] for ws in result["windows"].values() for w in ws})


def rates_of(result: dict) -> tuple[float, float, float]:
    """Per second: candidates over the whole process, over the evolution alone, and those on a GPU over it."""
    evolution = result["evolution_s"]
    return result["candidates"] / result["wall_s"], result["candidates"] / evolution, on_a_gpu(result) / evolution


def print_table(results: list[dict], args) -> None:
    one = next((r for r in results if r["gpus"] == 1), None)
    first = next((r["params"] for r in results if "params" in r), params(args, args.generations))  # early files lack it
    print(f"{first['problem']}, {first['children']} candidates per generation, overlap {first['overlap']}")
    print(
        "| GPUs | generations | candidates | on a GPU | process s | candidates/hour | x 1 GPU | Prefect start-up s "
        "| evolution s | candidates/hour | x 1 GPU | on a GPU per hour | x 1 GPU | GPU s per candidate | GPUs busy "
        "| harness start-up s (median) | busy windows by GPU | overlaps | pinning |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    base = rates_of(one) if one else (0, 0, 0)
    for r in results:
        windows, gens = r["windows"], r.get("params", first)["generations"]
        on_gpu, rates = on_a_gpu(r), rates_of(r)
        gpu_s = sum(w[1] - w[0] for ws in windows.values() for w in ws)
        times = [f"{rate / b:.2f}" if b else "-" for rate, b in zip(rates, base, strict=True)]
        counts = ", ".join(f"GPU {gpu}: {len(w)}" for gpu, w in sorted(windows.items()))
        share = busy_share(windows)
        starts = r.get("harness_start_s")  # the first saved files lack it
        start = f"{statistics.median(starts):.2f}" if starts else "-"
        print(
            f"| {r['gpus']} | {gens} | {r['candidates']} | {on_gpu} | {r['wall_s']:.1f} | {3600 * rates[0]:.0f} "
            f"| {times[0]} | {r['startup_s']:.1f} | {r['evolution_s']:.1f} | {3600 * rates[1]:.0f} | {times[1]} "
            f"| {3600 * rates[2]:.0f} | {times[2]} | {gpu_s / on_gpu if on_gpu else 0:.1f} "
            f"| {'-' if share is None else f'{100 * share:.0f}%'} | {start} | {counts} "
            f"| {sum(overlaps(w) for w in windows.values())} | {pinning(r)} |"
        )
    print("\nIdle GPU time between the first window's start and the last one's end (count, GPU s):")
    print("| GPUs | generations | idle GPU s | start/end | gaps under 1 s | gaps of 1-3 s | gaps of 3 s+ |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        idle = idle_breakdown(r["windows"])
        if idle is not None:
            cells = " | ".join(f"{n}, {s:.1f}" for n, s in idle.values())
            total = sum(s for _, s in idle.values())
            print(f"| {r['gpus']} | {r.get('params', first)['generations']} | {total:.1f} | {cells} |")


if __name__ == "__main__":
    main()
