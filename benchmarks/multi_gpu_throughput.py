"""Candidates per hour on 1 GPU against N GPUs, and proof that no two candidates ever shared a GPU.

Runs the same `ksci evolve` (fresh compile cache and Prefect state each time, so nothing is reused) first with
`--gpus 0`, then with every visible GPU, and prints candidates per hour for each. From the lineage, it then checks
every GPU's busy windows (verify and benchmark of each candidate, recorded by the parent around each harness
process) for overlaps.
    python benchmarks/multi_gpu_throughput.py --problem fp8_gemm --generations 2 --children 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ksci.evaluate import visible_gpus
from ksci.lineage import LineageStore


def run_once(args, gpus: list[str], work: Path) -> dict:
    label = "gpus-" + "-".join(gpus)
    env = dict(os.environ, KSCI_COMPILE_CACHE=str(work / f"cache-{label}"), PREFECT_HOME=str(work / f"prefect-{label}"))
    store = work / f"store-{label}"
    command = [
        sys.executable,
        "-m",
        "ksci.cli",
        "evolve",
        "--problem",
        args.problem,
        "--generations",
        str(args.generations),
        "--children",
        str(args.children),
        "--gpus",
        ",".join(gpus),
        "--run",
        label,
        "--store",
        str(store),
    ]
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"{label}: ksci evolve failed")
    rows = LineageStore(store).read(label)
    return {"label": label, "gpus": len(gpus), "wall_s": wall, "candidates": len(rows), "rows": rows}


def busy_windows(rows) -> dict[str, list[tuple[float, float, str]]]:
    windows: dict[str, list[tuple[float, float, str]]] = {}
    for _, row in rows.iterrows():
        fingerprint = json.loads(row["fingerprint_json"])
        for key in ("verify_gpu_window", "gpu_window"):
            w = fingerprint.get(key)
            if w:
                windows.setdefault(str(w["device"]), []).append((w["start"], w["end"], row["candidate_id"]))
    return windows


def overlaps(windows: list[tuple[float, float, str]]) -> int:
    ordered = sorted(windows)
    return sum(1 for a, b in zip(ordered, ordered[1:], strict=False) if b[0] < a[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--children", type=int, default=8)
    args = parser.parse_args()
    every = visible_gpus("cuda") or visible_gpus("rocm")
    with tempfile.TemporaryDirectory(prefix="ksci-throughput-") as tmp:
        results = [run_once(args, ["0"], Path(tmp)), run_once(args, every, Path(tmp))]
    base = results[0]["candidates"] / results[0]["wall_s"]
    print(
        f"{'GPUs':>4s} {'candidates':>10s} {'wall s':>7s} {'candidates/hour':>15s} {'x 1 GPU':>8s} {'busy windows by GPU':>20s}"
        f" {'overlaps':>8s}"
    )
    for r in results:
        windows = busy_windows(r["rows"])
        rate = r["candidates"] / r["wall_s"]
        counts = ",".join(f"{gpu}:{len(w)}" for gpu, w in sorted(windows.items()))
        print(
            f"{r['gpus']:>4d} {r['candidates']:>10d} {r['wall_s']:>7.1f} {3600 * rate:>15.0f} {rate / base:>8.2f} "
            f"{counts:>20s} {sum(overlaps(w) for w in windows.values()):>8d}"
        )


if __name__ == "__main__":
    main()
