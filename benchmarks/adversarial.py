"""Evaluate every adversarial kernel and every honest seed and correct solution on this GPU, and print one table.

For the lead's check of issue 7 (and issue 30: the adversarial kernels that are right on `spec` inputs only must be
`wrong`, their message naming the input profile that failed): no adversarial kernel may come back `ok`, every
honest kernel (fp8_gemm, fp8_gemm_kmajor and rmsnorm: seeds and correct solutions) must, and the
honest geomeans should match docs/results.md (H200: fp8_gemm mma 237.47 us, naive 8044.79, smem_tiled 1470.81,
mma_tuned 241.04; rmsnorm naive 66.40, vectorized 61.36, warp_per_row 74.63) within 2%. Usage:

    python benchmarks/adversarial.py [--target cuda] [--quick] [--quick-honest] [--only honest|adversarial]
                                     [--held-out N] [--json-out FILE]

--quick times the adversarial kernels on two benchmark shapes only; honest kernels get every shape, as
benchmarks/evaluate_seeds.py does, so that their geomeans compare with docs/results.md, unless --quick-honest times
them the same short way (every verification check and timing rule still applies; only the geomeans stop comparing).
Every verification also checks --held-out shapes (default 3) drawn from the shape contract
(ksci/problem/contract.py). At the end it prints the catch table of docs/threat-model.md (benchmarks/catch_table.py)
with the verdicts measured on this run.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from catch_table import print_catch_table  # benchmarks/, the script's own folder

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.contract import DEFAULT_COUNT
from ksci.problem.render import render_kernel
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, load_problem

QUICK = {"min_reps": 5, "max_reps": 20, "budget_s": 0.5}


# One tuned point per FP8 problem beside the defaults (issue 30: honest kernels are ok on every input profile):
# fp8_gemm_kmajor's best uniform point of docs/results.md (three consumer warpgroups, BM 192, four stages, no split-K);
# for fp8_gemm a point through the features the default leaves off (BN 192 in two N parts, TMA multicast in pairs,
# C stored without shared memory, GROUP_M 16; no spills). Both set OVERLAP 0, which the default turns on and
# neither allows.
TUNED = {
    "fp8_gemm_kmajor": ("wgmma", {"BM": 192, "CONSUMERS": 3, "STAGES": 4, "SPLIT_K": 1, "OVERLAP": 0}),
    "fp8_gemm": ("wgmma", {"BN": 192, "N_PARTS": 2, "CLUSTER": 2, "GROUP_M": 16, "EPI": 0, "OVERLAP": 0}),
}


def honest_kernels(problem_name: str, target: str) -> list[tuple[str, str, set[str], str]]:
    problem = load_problem(problem_name)
    dialect = DIALECT_OF_TARGET[target]
    kernels = [(f"{problem_name} seed:{t.name}", "ok", render_kernel(t)) for t in problem.templates_for(dialect)]
    if problem_name in TUNED and target == "cuda":
        name, params = TUNED[problem_name]
        point = " ".join(f"{k}={v}" for k, v in params.items())
        kernels.append(
            (f"{problem_name} tuned:{name} {point}", "ok", render_kernel(problem.template(dialect, name), params))
        )
    for path in problem.solutions("correct"):
        if path.suffix == SUFFIX_OF_DIALECT[dialect]:
            kernels.append((f"{problem_name} solution:{path.stem}", "ok", path.read_text()))
    return [(problem_name, name, {expect}, source) for name, expect, source in kernels]


def adversarial_kernels(target: str) -> list[tuple[str, str, set[str], str]]:
    problem = load_problem("fp8_gemm")
    kernels = []
    for path in problem.solutions("adversarial"):
        if path.suffix == SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[target]]:
            text = path.read_text()
            expected = set(text.splitlines()[0].split("expect:")[1].strip().split("|"))
            kernels.append(("fp8_gemm", f"adversarial:{path.stem}", expected, text))
    return kernels


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", default="cuda", choices=("cuda", "rocm"))
    parser.add_argument("--quick", action="store_true", help="adversarial kernels on two shapes, short timing")
    parser.add_argument("--quick-honest", action="store_true", help="honest kernels on two shapes, short timing")
    parser.add_argument("--only", choices=("honest", "adversarial"))
    parser.add_argument("--held-out", type=int, default=DEFAULT_COUNT, help="held-out shapes per verification")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    kernels = []
    if args.only != "adversarial":
        for name in ("fp8_gemm", "fp8_gemm_kmajor", "rmsnorm"):
            kernels += honest_kernels(name, args.target)
    if args.only != "honest":
        kernels += adversarial_kernels(args.target)
    rows, failures = [], 0
    print(f"{'kernel':40s} {'expected':28s} {'got':14s} {'geomean_us':>11s} {'s':>6s}  reason")
    for problem_name, name, expected, source in kernels:
        problem = load_problem(problem_name)
        options = EvaluationOptions(target=args.target, time_baselines=False, held_out=args.held_out)
        if args.quick_honest if not name.startswith("adversarial:") else args.quick:
            quick = {"benchmarks": problem.benchmarks[:2], "policy": QUICK}
            options = EvaluationOptions(target=args.target, held_out=args.held_out, **quick)
        if "timeout" in expected:
            options = replace(options, timeout_s=60.0)
        start = time.monotonic()
        verdict = evaluate_source(problem, source, options)
        seconds = time.monotonic() - start
        adversarial = name.startswith("adversarial:")
        good = str(verdict.status) in expected and not (adversarial and verdict.status == Status.OK)
        failures += not good
        geomean = f"{verdict.geomean_us:.2f}" if verdict.geomean_us else "-"
        reason = (verdict.message or "").replace("\n", " ")[:110]
        mark = "" if good else "  <-- UNEXPECTED"
        print(
            f"{name:40s} {'|'.join(sorted(expected)):28s} {verdict.status:14s} {geomean:>11s} {seconds:6.0f}  {reason}{mark}"
        )
        rows.append({"kernel": name, "expected": sorted(expected), **verdict.to_dict(), "seconds": seconds})
    gpu = next((r["fingerprint"].get("gpu") for r in rows if r["fingerprint"].get("gpu")), "unknown GPU")
    sandbox = next((r["fingerprint"].get("sandbox") for r in rows if r["fingerprint"].get("sandbox")), None)
    print(f"\n{len(rows)} kernels on {gpu}; {failures} unexpected verdicts; child sandbox: {sandbox}")
    adversarial = {r["kernel"].removeprefix("adversarial:"): r for r in rows if r["kernel"].startswith("adversarial:")}
    print_catch_table(
        {k: set(r["expected"]) for k, r in adversarial.items()}, {k: r["status"] for k, r in adversarial.items()}
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1, default=str))
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
