"""Import every test problem of tests/data/ (six KernelBench files, the gpu-mode fp8 task) into a temporary folder
with `ksci import`'s code, evaluate each problem's hand-written correct and wrong CUDA kernels through ksci's
harness, and print a table: the correct kernel's verdict and times beside the reference (the source's own PyTorch)
and the vendor baseline (torch.compile, eager where it fails), the wrong kernel's verdict, and whether both got
the verdict their first line expects.

On an H100/H200:  python benchmarks/imported_problems.py
Faster:           python benchmarks/imported_problems.py --no-baselines     (kernel times only)
                  python benchmarks/imported_problems.py --verify-only      (verdicts only)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tests/support: the scripted LLM server and its scripts

from support.imported_problems import expected, import_all, kernels  # noqa: E402

from ksci.evaluate.options import EvaluationOptions  # noqa: E402
from ksci.evaluate.stage_order import evaluate_source  # noqa: E402
from ksci.problem.spec import load_problem  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", choices=("cuda", "rocm"), default="cuda")
    parser.add_argument("--verify-only", action="store_true", help="verdicts only, no timing")
    parser.add_argument("--no-baselines", action="store_true", help="do not time the reference and vendor")
    parser.add_argument("--only", nargs="*", help="these problems only")
    args = parser.parse_args()
    dest = Path(tempfile.mkdtemp(prefix="ksci-imported-"))
    os.environ["KSCI_KERNELS_DIR"] = str(dest)  # the harness child finds the problems there too
    names = [n for n in import_all(dest) if not args.only or n in args.only]
    print(f"imported {len(names)} problems into {dest}", flush=True)
    phases = ("verify",) if args.verify_only else ("verify", "benchmark")
    full = EvaluationOptions(target=args.target, phases=phases, time_baselines=not args.no_baselines)
    quick = EvaluationOptions(target=args.target, phases=("verify",), time_baselines=False)
    rows, all_as_expected = [], True
    for name in names:
        problem, paths = load_problem(name), kernels(name)
        started = time.monotonic()
        good = evaluate_source(problem, paths["correct"].read_text(), full)
        bad = evaluate_source(problem, paths["wrong"].read_text(), quick)
        as_expected = str(good.status) == expected(paths["correct"]) and str(bad.status) == expected(paths["wrong"])
        all_as_expected &= as_expected
        rows.append((name, good, bad, as_expected, time.monotonic() - started))
        times = "" if args.verify_only else _times(good)
        print(f"  {name}: correct {good.status}, wrong {bad.status} ({times}{rows[-1][-1]:.0f} s)", flush=True)
        for verdict in (good, bad):
            if str(verdict.status) not in ("ok", "wrong"):
                print(f"    {verdict.status}: {verdict.message}\n{verdict.harness_log[-1500:]}", flush=True)
    _print_table(rows)
    print(f"\n{'all as expected' if all_as_expected else 'NOT all as expected'}")
    return 0 if all_as_expected else 1


def _print_table(rows) -> None:
    header = ("problem", "correct", "kernel us", "reference us", "vendor us", "vs ref", "wrong", "as expected")
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for name, good, bad, as_expected, _seconds in rows:
        ratio = f"{good.speedup_vs_reference:.2f}x" if good.speedup_vs_reference else "-"
        cells = (
            name,
            str(good.status),
            _us(good.geomean_us),
            _us(good.reference_geomean_us),
            _us(good.vendor_geomean_us),
            ratio,
            str(bad.status),
            "yes" if as_expected else "NO",
        )
        print("| " + " | ".join(cells) + " |")


def _times(verdict) -> str:
    return (
        f"kernel {_us(verdict.geomean_us)} us, reference {_us(verdict.reference_geomean_us)} us, "
        f"vendor {_us(verdict.vendor_geomean_us)} us; "
    )


def _us(value: float | None) -> str:
    return f"{value:.1f}" if value else "-"


if __name__ == "__main__":
    sys.exit(main())
