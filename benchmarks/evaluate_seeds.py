"""Evaluate every seed template (at its default) and every correct solution of a problem on this GPU.

Prints one table: each kernel's geomean over the benchmark shapes, the reference and vendor library timed in
the same process, the speed of light, and the ratios. Usage:
    python benchmarks/evaluate_seeds.py --problem fp8_gemm [--target cuda] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.render import render_kernel
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, load_problem


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--target", default="cuda", choices=("cuda", "rocm"))
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    problem = load_problem(args.problem)
    dialect = DIALECT_OF_TARGET[args.target]
    kernels = {f"seed:{t.name}": render_kernel(t) for t in problem.templates_for(dialect)}
    for path in problem.solutions("correct"):
        if path.suffix == SUFFIX_OF_DIALECT[dialect]:
            kernels[f"solution:{path.stem}"] = path.read_text()
    options = EvaluationOptions(target=args.target)
    verdicts = {name: evaluate_source(problem, source, options) for name, source in kernels.items()}
    gpu = next((v.fingerprint.get("gpu") for v in verdicts.values() if v.fingerprint.get("gpu")), "unknown GPU")
    print(f"\n{problem.name} on {gpu}, {datetime.date.today()}: geomean over {len(problem.benchmarks)} shapes (us)")
    print(
        f"{'kernel':28s} {'status':10s} {'geomean':>10s} {'reference':>10s} {'vendor':>9s} {'SOL':>7s} "
        f"{'x ref':>7s} {'x vendor':>8s} {'of SOL':>7s}"
    )
    for name, v in verdicts.items():
        sol = v.speed_of_light_geomean_us / v.geomean_us if v.geomean_us and v.speed_of_light_geomean_us else None
        print(
            f"{name:28s} {v.status:10s} {_f(v.geomean_us):>10s} {_f(v.reference_geomean_us):>10s} "
            f"{_f(v.vendor_geomean_us):>9s} {_f(v.speed_of_light_geomean_us):>7s} "
            f"{_f(v.speedup_vs_reference):>7s} {_f(v.speedup_vs_vendor):>8s} {_pct(sol):>7s}"
        )
        if v.message:
            print(f"  {v.message[:300]}")
    if args.json_out:
        args.json_out.write_text(json.dumps({k: v.to_dict() for k, v in verdicts.items()}, indent=1))


def _f(x: float | None) -> str:
    return f"{x:.2f}" if x else "-"


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x else "-"


if __name__ == "__main__":
    main()
