"""How often an honest kernel is called `suspicious`: evaluate honest kernels many times on a busy machine.

Issue 30 asks for at least 120 evaluations of honest kernels (both FP8 problems and rmsnorm) with 0 `suspicious`,
on a 2-GPU machine each GPU evaluating while the other is busy. Here one process evaluates on every GPU of
--devices at once (one thread per GPU, as an evolution's parent does), so each evaluation has a busy neighbour on
the other GPU and in the same interpreter; --cpu-load N adds N processes that spin on the host's cores. The honest
kernels are every template's default point and every shipped correct solution of fp8_gemm, fp8_gemm_kmajor and
rmsnorm (benchmarks/adversarial.py's list), taken in turn. Prints one line per evaluation and a table of verdicts
per kernel; exit status 1 when any honest kernel was not `ok`. Usage, on a GPU host:

    python benchmarks/false_suspicion.py --runs 120 --devices 0,1 [--cpu-load 8] [--baselines] [--json-out F]

--skip-slow leaves out the naive fp8 seeds (about 40 s an evaluation; the others take 5 to 15 s). Beside the
verdicts it prints how close the honest kernels came to the host-gap and device-tail rules: per shape, the calls'
gap beyond the idle calls' (ksci/evaluate/judge/timing_rules.py's floor: 30 us) and the tail beyond theirs (floor 60 us), read
from the timing messages as the parent judged them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from adversarial import honest_kernels  # noqa: E402

from ksci.evaluate.judge import timing_rules  # noqa: E402
from ksci.evaluate.options import EvaluationOptions  # noqa: E402
from ksci.evaluate.stage_order import evaluate_source  # noqa: E402
from ksci.problem.spec import load_problem  # noqa: E402

PROBLEMS = ("fp8_gemm", "fp8_gemm_kmajor", "rmsnorm")
SLOW = {"fp8_gemm seed:naive", "fp8_gemm_kmajor seed:naive"}
SPIN = "while True: pass"
_EVALUATION = threading.local()  # the margins of the evaluation this thread runs
_judge = timing_rules.timing_doubts


def _margins_kept(message: dict, parent_us=None) -> list[str]:
    """timing_rules.timing_doubts, unchanged, keeping each shape's margins to the rules on the way."""
    integrity = message["integrity"]
    gap = integrity["gap_us"] - integrity["gap_idle_us"]
    tail = min(integrity["tail_us"] - integrity["tail_idle_us"], integrity["sync_us"] - integrity["sync_idle_us"])
    margins = getattr(_EVALUATION, "margins", None)
    if margins is not None:
        median = message["kernel"]["median_us"]
        margins.append(
            {
                "key": message.get("key"),
                "gap_us": gap,
                "tail_us": tail,
                "idle_gap_us": integrity["gap_idle_us"],
                # How much of each rule's limit the shape used (timing_rules.timing_doubts: a doubt above 1.0)
                "gap_share": gap / max(timing_rules.GAP_FLOOR_US, timing_rules.GAP_FRACTION * median),
                "tail_share": tail / max(timing_rules.TAIL_FLOOR_US, timing_rules.TAIL_FRACTION * median),
            }
        )
    return _judge(message, parent_us)


timing_rules.timing_doubts = _margins_kept


def kernels(skip_slow: bool) -> list[tuple[str, str, str]]:
    found = [(p, name, source) for problem in PROBLEMS for p, name, _, source in honest_kernels(problem, "cuda")]
    return [k for k in found if not (skip_slow and k[1] in SLOW)]


class Runs:
    """The shared queue of evaluations and their results (threads take the next kernel in turn)."""

    def __init__(self, todo: list[tuple[str, str, str]], runs: int):
        self.jobs = iter(itertools.islice(itertools.cycle(todo), runs))
        self.lock = threading.Lock()
        self.rows: list[dict] = []

    def next_job(self):
        with self.lock:
            return next(self.jobs, None)

    def record(self, row: dict) -> None:
        with self.lock:
            self.rows.append(row)
            n = len(self.rows)
        reason = (row["message"] or "").replace("\n", " ")[:120]
        gap = "" if row["most_gap_us"] is None else f"gap+{row['most_gap_us']:6.1f} tail+{row['most_tail_us']:6.1f} us"
        print(
            f"{n:4d} gpu {row['device']} {row['kernel']:36s} {row['status']:12s} {row['seconds']:6.1f} s {gap}  {reason}"
        )


def worker(runs: Runs, device: str, baselines: bool) -> None:
    while (job := runs.next_job()) is not None:
        problem_name, name, source = job
        options = EvaluationOptions(target="cuda", device=device, time_baselines=baselines)
        start = time.monotonic()
        _EVALUATION.margins = []
        verdict = evaluate_source(load_problem(problem_name), source, options)
        margins = [{**m, "kernel": name} for m in _EVALUATION.margins]
        runs.record(
            {
                "kernel": name,
                "device": device,
                "status": str(verdict.status),
                "message": verdict.message,
                "geomean_us": verdict.geomean_us,
                "seconds": time.monotonic() - start,
                "most_gap_us": max((m["gap_us"] for m in margins), default=None),
                "most_tail_us": max((m["tail_us"] for m in margins), default=None),
                "most_idle_gap_us": max((m["idle_gap_us"] for m in margins), default=None),
                "shapes": margins,
            }
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--devices", default="0", help="GPU ids evaluated on at once, e.g. 0,1")
    parser.add_argument("--cpu-load", type=int, default=0, help="processes spinning on the host's cores meanwhile")
    parser.add_argument("--baselines", action="store_true", help="time the reference and vendor too (longer)")
    parser.add_argument("--skip-slow", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    runs = Runs(kernels(args.skip_slow), args.runs)
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.cpu_load)]
    start = time.monotonic()
    try:
        threads = [threading.Thread(target=worker, args=(runs, d, args.baselines)) for d in args.devices.split(",")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(
        f"\n{len(runs.rows)} evaluations in {time.monotonic() - start:.0f} s on GPUs {args.devices}, "
        f"{args.cpu_load} spinning processes beside"
    )
    print(f"{'kernel':36s} {'runs':>5s} {'ok':>5s} {'suspicious':>10s} {'other':>6s}")
    by_kernel: dict[str, Counter] = {}
    for row in runs.rows:
        by_kernel.setdefault(row["kernel"], Counter())[row["status"]] += 1
    for name, counts in sorted(by_kernel.items()):
        other = sum(counts.values()) - counts["ok"] - counts["suspicious"]
        print(f"{name:36s} {sum(counts.values()):5d} {counts['ok']:5d} {counts['suspicious']:10d} {other:6d}")
    total = Counter(row["status"] for row in runs.rows)
    print(
        f"{'all':36s} {len(runs.rows):5d} {total['ok']:5d} {total['suspicious']:10d} "
        f"{len(runs.rows) - total['ok'] - total['suspicious']:6d}"
    )
    shapes = [m for row in runs.rows for m in row["shapes"]]
    if shapes:
        gaps = sorted(m["gap_us"] for m in shapes)
        tails = sorted(m["tail_us"] for m in shapes)
        idle = sorted(m["idle_gap_us"] for m in shapes)
        print(
            f"\n{len(shapes)} timed shapes: calls' gap beyond the idle calls' median {gaps[len(gaps) // 2]:.1f} us,"
            f" 99th percentile {gaps[int(0.99 * (len(gaps) - 1))]:.1f}, most {gaps[-1]:.1f} (rule: 30 us or a quarter"
            f" of the call); tail beyond idle most {tails[-1]:.1f} us (rule: 60 us); idle calls' own gap median"
            f" {idle[len(idle) // 2]:.1f} us, most {idle[-1]:.1f}"
        )
        for rule in ("gap", "tail"):
            worst = max(shapes, key=lambda m: m[f"{rule}_share"])
            print(
                f"closest to the {rule} rule: {worst[f'{rule}_share']:.0%} of its limit"
                f" ({worst[f'{rule}_us']:.1f} us beyond idle, {worst['kernel']} on {worst['key']})"
            )
    if args.json_out:
        args.json_out.write_text(json.dumps(runs.rows, indent=1))
    raise SystemExit(0 if total["ok"] == len(runs.rows) else 1)


if __name__ == "__main__":
    main()
