"""Record what the harness measures of each timed call, for the timing rules in ksci/evaluate/judge/timing_rules.py.

For each kernel given (a source file, or `seed:TEMPLATE` for a seed's default point) it runs the harness once,
screen and library check included, and prints per shape: the median call, the host latency the events do not
account for (gap) and the device's tail after the end event (tail), each beside the same for a call that does
nothing, and which timing doubts the parent raised. --json-out keeps every timing message (the per-call samples
too): tests/data/timing_samples.json was written so. Usage:

    python benchmarks/timing_samples.py --problem fp8_gemm seed:mma FILE.cu ... [--shapes 4] [--json-out F]
    python benchmarks/timing_samples.py ... --unscreened   # compile past the screen and library check (cheats)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ksci.evaluate.host_stages import compile_candidate
from ksci.evaluate.judge.classify import classify, expected_reports
from ksci.evaluate.judge.timing_rules import timing_doubts
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status, Verdict
from ksci.evaluate.run.harness_process import run_harness
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import default_arch, find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import DIALECT_OF_TARGET, load_problem


def source_of(problem, name: str, target: str) -> str:
    if name.startswith("seed:"):
        return render_kernel(problem.template(DIALECT_OF_TARGET[target], name.removeprefix("seed:")))
    return Path(name).read_text()


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kernels", nargs="+")
    parser.add_argument("--problem", default="fp8_gemm")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--shapes", type=int, default=0, help="the first N benchmark shapes only (0: all)")
    parser.add_argument("--unscreened", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    problem = load_problem(args.problem)
    benchmarks = tuple(problem.benchmarks[: args.shapes]) if args.shapes else None
    options = EvaluationOptions(target=args.target, benchmarks=benchmarks, time_baselines=False)
    records = []
    print(
        f"{'kernel':28s} {'shape':18s} {'median':>9s} {'gap':>7s} {'idle':>6s} {'tail':>7s} {'idle':>6s} calls  doubts"
    )
    for name in args.kernels:
        source = source_of(problem, name, args.target)
        if args.unscreened:
            compiled = compile_source(source, find_toolchain(args.target), default_arch(args.target), options.cache_dir)
        else:
            compiled = compile_candidate(source, options)
        if not compiled.ok:
            print(f"{name:28s} not compiled: {(compiled.rejected or compiled.log)[-200:]}")
            continue
        outcome = run_harness(problem, compiled.library, options)
        verdict = classify(
            problem,
            outcome,
            Verdict(Status.COMPILED, problem.name, args.target, compile=compiled),
            expected_reports(problem, options),
        )
        for message in outcome.events("timing"):
            kernel, integrity = message["kernel"], message["integrity"]
            doubts = timing_doubts(message)
            print(
                f"{Path(name).name[:28]:28s} {message['key']:18s} {kernel['median_us']:9.2f} "
                f"{integrity['gap_us']:7.1f} {integrity['gap_idle_us']:6.1f} {integrity['tail_us']:7.1f} "
                f"{integrity['tail_idle_us']:6.1f} {integrity['calls']:5d}  {'; '.join(doubts)[:80]}"
            )
            records.append({**message, "name": Path(name).name, "status": str(verdict.status)})
        print(f"{name}: {verdict.status} {verdict.message[:200]}")
    if args.json_out:
        args.json_out.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
