"""Run `ksci evolve`, kill it (SIGKILL to its whole process group) once generation K has started recording,
then run the same command again to the end. Prints what the rerun executed and what it took from the cache,
and the improvement of the best geomean over the seeds.

    python benchmarks/evolve_kill_rerun.py --problem fp8_gemm --generations 5 --kill-in 3 [--children 4]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from ksci.lineage.store import LineageStore

STORE = "data/runs"


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--kill-in", type=int, default=3, help="kill once this generation has a recorded row")
    parser.add_argument("--run", default=f"kill-rerun-{int(time.time())}")
    args = parser.parse_args()
    command = [
        sys.executable,
        "-m",
        "ksci.cli",
        "evolve",
        "--problem",
        args.problem,
        "--target",
        args.target,
        "--generations",
        str(args.generations),
        "--children",
        str(args.children),
        "--run",
        args.run,
        "--store",
        STORE,
    ]
    store = LineageStore(STORE)
    first = subprocess.Popen(
        command, start_new_session=True, stdout=open(f"{args.run}-first.log", "w"), stderr=subprocess.STDOUT
    )
    start = time.monotonic()
    while first.poll() is None:
        rows = store.read(args.run)
        if not rows.empty and (rows["generation"] >= args.kill_in).any():
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            break
        time.sleep(0.5)
    rows = store.read(args.run)
    print(
        f"first run killed after {time.monotonic() - start:.0f} s (exit {first.returncode}); recorded rows by "
        f"generation: {rows.groupby('generation').size().to_dict()}",
        flush=True,
    )
    start = time.monotonic()
    second = subprocess.run(command, capture_output=True, text=True)
    print(f"rerun took {time.monotonic() - start:.0f} s, exit {second.returncode}; its summary:")
    print("\n".join(line for line in second.stdout.splitlines() if not line.startswith(("0", "1")) or "|" not in line))
    rows = store.read(args.run)
    ok = rows[rows["status"] == "ok"]
    seeds = ok[ok["generation"] == 0]
    naive = seeds[seeds["template"] == "naive"]["geomean_us"].min()
    print(
        f"rows: {len(rows)} ({rows['candidate_id'].nunique()} distinct candidates); statuses: "
        f"{rows['status'].value_counts().to_dict()}"
    )
    print(
        f"best seed {seeds['geomean_us'].min():.2f} us (naive seed {naive:.2f} us); best overall "
        f"{ok['geomean_us'].min():.2f} us: {seeds['geomean_us'].min() / ok['geomean_us'].min():.2f}x over the best "
        f"seed, {naive / ok['geomean_us'].min():.2f}x over the naive seed"
    )


if __name__ == "__main__":
    main()
