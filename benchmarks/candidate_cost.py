"""Where one candidate's seconds go (issue 28: a thousand candidates an hour): time each part of an evaluation apart.

An evolution evaluates a candidate in one harness run on its GPU: verification (every test shape on every input
profile), then the benchmark (every benchmark shape timed one call at a time); the reference and the vendor library
are timed once per generation, not beside each candidate (flows/evolve.py's generation_baselines). This script
times, for one compiled kernel and on one GPU, each of:

- a harness-like process start: `python -c "import torch"` and a first CUDA call, as a spare harness pays it;
- the verify run, the benchmark run without the baselines, the benchmark run with them (ksci.evaluate.stage_order's
  evaluate_source, the compile cached), so the baselines' cost is the difference of the last two;
- both phases in one run without the baselines: a candidate as an evolution evaluates it;
- within the benchmark: the device time of the candidate's timed calls (median x calls per shape, summed) against
  the run's wall time, i.e. how much of it is measurement.
- the benchmark raced (`ksci evolve --race`) against a best kernel 10% faster than this one on every shape (its own
  medians x 0.9): what racing saves on a candidate that loses everywhere, the most it can save;
- the verify run and the candidate's one run again without held-out shapes (`held_out=0`; the other parts check
  the default 3, docs/evaluation.md): what the held-out checks cost a candidate, on the same machine.

Prints a table (median of --reps runs). Usage, on a GPU host:

    python benchmarks/candidate_cost.py [--problem fp8_gemm_kmajor] [--template wgmma] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.contract import DEFAULT_COUNT
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem, shape_key

START = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
NO_HELD_OUT = "verify + benchmark, one run, no held-out shapes"
PARTS = (  # name, phases, baselines timed, held-out shapes checked
    ("verify", ("verify",), True, DEFAULT_COUNT),
    ("verify, no held-out shapes", ("verify",), True, 0),
    ("benchmark, no baselines", ("benchmark",), False, DEFAULT_COUNT),
    ("benchmark with baselines", ("benchmark",), True, DEFAULT_COUNT),
    ("verify + benchmark, one run, no baselines", ("verify", "benchmark"), False, DEFAULT_COUNT),
    (NO_HELD_OUT, ("verify", "benchmark"), False, 0),
)


def process_start_s() -> float:
    begin = time.perf_counter()
    subprocess.run([sys.executable, "-c", START], check=True)
    return time.perf_counter() - begin


def timed_device_s(verdict) -> tuple[float, int]:
    """Seconds of device time in the candidate's timed calls (median x calls per shape, summed) and the calls."""
    seconds, calls = 0.0, 0
    for timing in verdict.timings:
        if timing.kernel is not None:
            seconds += timing.kernel.median_us * timing.kernel.reps / 1e6
            calls += timing.kernel.reps
    return seconds, calls


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="fp8_gemm_kmajor")
    parser.add_argument("--template", default="wgmma")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    problem = load_problem(args.problem)
    source = render_kernel(problem.template("cuda", args.template))
    compiled = evaluate_source(problem, source, EvaluationOptions(compile_only=True))
    print(f"{args.problem} {args.template} default: {compiled.status}; {len(problem.tests)} test shapes x "
          f"{len(problem.inputs)} input profiles, {len(problem.benchmarks)} benchmark shapes")  # fmt: skip
    walls: dict[str, list[float]] = {"process start (python, torch, CUDA)": []}
    device: list[tuple[float, int]] = []
    for _ in range(args.reps):
        walls["process start (python, torch, CUDA)"].append(process_start_s())
        for name, phases, baselines, held_out in PARTS:
            begin = time.perf_counter()
            options = EvaluationOptions(phases=phases, time_baselines=baselines, held_out=held_out)
            verdict = evaluate_source(problem, source, options)
            walls.setdefault(name, []).append(time.perf_counter() - begin)
            if str(verdict.status) != "ok":
                raise SystemExit(f"{name}: {verdict.status}: {verdict.message}")
            if name == "benchmark, no baselines":
                device.append(timed_device_s(verdict))
                race = tuple((shape_key(t.shape), 0.9 * t.kernel.median_us) for t in verdict.timings if t.kernel)
        begin = time.perf_counter()
        raced = evaluate_source(
            problem, source, EvaluationOptions(phases=("benchmark",), time_baselines=False, race=race)
        )
        walls.setdefault("benchmark raced (best 10% faster everywhere)", []).append(time.perf_counter() - begin)
        if str(raced.status) != "ok" or not all(t.raced_against_us for t in raced.timings if t.kernel):
            raise SystemExit(f"raced benchmark: {raced.status}: {raced.message} (every shape should be raced out)")
    median = {name: statistics.median(values) for name, values in walls.items()}
    print(f"\n{'part':44s} {'median s':>9s}  runs")
    for name, values in walls.items():
        print(f"{name:44s} {median[name]:9.2f}  {', '.join(f'{v:.2f}' for v in values)}")
    baselines = median["benchmark with baselines"] - median["benchmark, no baselines"]
    per_candidate = median["verify + benchmark, one run, no baselines"]
    seconds, calls = statistics.median(d[0] for d in device), statistics.median(d[1] for d in device)
    print(f"{'  of which the baselines (difference)':44s} {baselines:9.2f}")
    print(
        f"{'  saved by racing a candidate that loses all':44s} "
        f"{median['benchmark, no baselines'] - median['benchmark raced (best 10% faster everywhere)']:9.2f}"
    )
    print(f"{'  of which the timed calls on the device':44s} {seconds:9.2f}  ({calls:.0f} calls)")
    held_out = per_candidate - median[NO_HELD_OUT]
    print(
        f"{'  held-out shapes (verify, one run)':44s} {median['verify'] - median['verify, no held-out shapes']:9.2f}"
        f"  {held_out:.2f} s, {100 * held_out / median[NO_HELD_OUT]:+.1f}% per candidate"
    )
    print(
        f"\none candidate as an evolution evaluates it (verify and benchmark in one run, the baselines timed once "
        f"a generation): {per_candidate:.2f} s, {3600 / per_candidate:.0f} an hour on one GPU if nothing else ran; "
        f"the candidate's own timed device work is {100 * seconds / per_candidate:.0f}% of it"
    )


if __name__ == "__main__":
    main()
