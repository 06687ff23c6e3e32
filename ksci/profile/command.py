"""`ksci profile`: the digest of one kernel source on one shape. Its arguments are here; the handler that
ksci/commands.py registers (cmd_profile) calls print_profile."""

from __future__ import annotations

import argparse
from pathlib import Path

from ksci.evaluate.options import EvaluationOptions
from ksci.problem.roofline import peaks_for
from ksci.problem.spec import TARGETS, Problem
from ksci.profile.digest import digest
from ksci.profile.stage import chosen_shape, profile_source


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problem", required=True, help="a problem's name (ksci problems lists them)")
    p.add_argument("--source", required=True, type=Path, help="kernel source (.cu for CUDA, .hip for HIP)")
    p.add_argument(
        "--target", choices=TARGETS, default="cuda", help="cuda: ncu, rocm: rocprofv3 (default: %(default)s)"
    )
    p.add_argument("--shape", help="a benchmark shape's key as ksci prints it, e.g. 6144x4608x7168 (default: the "
                   "benchmark with the most work)")  # fmt: skip
    p.add_argument("--arch", help="GPU architecture (default: the GPU's own)")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="the profiler's time limit, seconds (default: %(default)s)"
    )
    p.add_argument(
        "--keep-csv",
        type=Path,
        help="copy the profiler's CSV and console output into this folder, with what it profiled (request.json, "
        "library.txt, command.txt) for a hand-run profiler (benchmarks/profile_check.sh)",
    )


def print_profile(problem: Problem, source: str, args: argparse.Namespace) -> tuple[bool, str]:
    """(profiled, the line of error) after printing the digest; the error is the shape's when it names none."""
    shape = chosen_shape(problem, args.shape)
    if isinstance(shape, str):
        return False, shape
    options = EvaluationOptions(target=args.target, arch=args.arch)
    result = profile_source(problem, source, options, shape, args.timeout, keep_dir=args.keep_csv)
    peaks = peaks_for(result.gpu) if result.gpu else None
    print(digest(result, peaks.bandwidth_tbs if peaks else None))
    if result.ok:
        print(f"({result.tool} took {result.seconds:.1f} s)")
    return result.ok, ""
