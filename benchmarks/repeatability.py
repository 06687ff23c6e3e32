"""Evaluate one kernel N times, each in a separate `ksci evaluate` process, and print the geomean spread.

    python benchmarks/repeatability.py --problem fp8_gemm --source FILE [--runs 5] [--target cuda]
The spread is (max - min) / median of the N geomeans.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    geomeans = []
    for run in range(args.runs):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ksci.cli",
                "evaluate",
                "--problem",
                args.problem,
                "--source",
                args.source,
                "--target",
                args.target,
                "--no-baselines",
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        verdict = json.loads(out.stdout)
        print(f"run {run + 1}: {verdict['status']} geomean {verdict['geomean_us']} us", flush=True)
        geomeans.append(verdict["geomean_us"])
    median = statistics.median(geomeans)
    spread = (max(geomeans) - min(geomeans)) / median
    print(
        f"{args.source}: {args.runs} processes, geomean median {median:.2f} us, "
        f"min {min(geomeans):.2f}, max {max(geomeans):.2f}, spread {100 * spread:.2f}%"
    )


if __name__ == "__main__":
    main()
