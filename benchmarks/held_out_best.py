"""Verify a run's best kernel on held-out shapes drawn now, outside the evolution (docs/evaluation.md).

The best candidate of a lineage run (lowest geomean among its `ok` rows; a tuning evolution's is usually a composed
kernel that dispatches on the shape) is verified again on every test shape and input profile, plus --held-out
shapes of the problem's shape contract that it does not list, drawn from os.urandom for this check alone. A
composed kernel sends every such shape to its default variant (ksci/problem/compose.py). Usage, on a GPU host:

    python benchmarks/held_out_best.py --run RUN [--store data/runs] [--held-out 20]

Prints the verdict, the held-out shapes and seeds, and per held-out shape its checks; exit 0 when `ok`.
"""

from __future__ import annotations

import argparse

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.stage_order import evaluate_source
from ksci.lineage.store import LineageStore
from ksci.problem.contract import MAX_HELD_OUT
from ksci.problem.spec import load_problem, shape_key
from ksci.report.summary import format_verdict
from ksci.run import DEFAULT_STORE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=str(DEFAULT_STORE), help=f"the lineage store (default {DEFAULT_STORE})")
    parser.add_argument("--run", required=True)
    parser.add_argument("--held-out", type=int, default=20, help=f"held-out shapes, 1 to {MAX_HELD_OUT}")
    args = parser.parse_args()
    if not 1 <= args.held_out <= MAX_HELD_OUT:
        parser.error(f"--held-out {args.held_out}: give 1 to {MAX_HELD_OUT}")
    store = LineageStore(args.store)
    best = store.best(args.run)
    if best is None:
        raise SystemExit(f"run {args.run!r} has no ok candidate with a geomean")
    problem = load_problem(best["problem"])
    source = store.read_source(best["source_path"])
    print(
        f"{args.run}: best {best['candidate_id']} ({best['geomean_us']:.2f} us, {best['proposer']}) on {problem.name}"
    )
    options = EvaluationOptions(target=best["target"], phases=("verify",), held_out=args.held_out)
    verdict = evaluate_source(problem, source, options)
    print(format_verdict(verdict))
    drawn = {shape_key(s) for s in verdict.fingerprint.get("held_out", [])}
    held = [c for c in verdict.checks if shape_key(c.shape) in drawn]
    print(f"\nheld-out checks: {sum(c.ok for c in held)} of {len(held)} ok over {len(drawn)} shapes")
    for check in held:
        print(
            f"  {shape_key(check.shape):>16s} seed {check.seed:<11d} {check.profile:11s} {'ok' if check.ok else 'WRONG'}"
        )
    raise SystemExit(0 if verdict.status == Status.OK else 1)


if __name__ == "__main__":
    main()
