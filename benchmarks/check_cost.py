"""Where one full check's milliseconds go (issue 28): the harness's Case and Case.verify on every test shape and input
profile (verification, release=True) and on every benchmark shape (a timed output's check, release=False), each
step fenced by a device-wide synchronisation so that its device work counts where it was asked for.

No candidate is compiled: the output is filled with the reference's own answer before the check (an honest kernel's
output), so every check passes and takes the path an ok candidate takes. A diagnosis of the harness's cost, not a
kernel timing. On a GPU host, from the project root:

    python benchmarks/check_cost.py [PROBLEM] [--reps N]

Prints per shape the fenced steps' medians (case drawn, output copied out, inputs drawn again, reference, compare,
wipe and release, inputs compared, guards) and the unfenced Case.verify, then the totals per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from ksci.evaluate.harness.cases import Case, _guards_intact, _wipe
from ksci.evaluate.harness.check import compare, same_bytes
from ksci.evaluate.harness.plan import recheck_shapes, verification_plan
from ksci.evaluate.harness.timing import CallTimer, L2Flusher
from ksci.problem.spec import load_problem, shape_key

STEPS = ("case", "copy_out", "draw_again", "reference", "compare", "wipe", "inputs_equal", "guards")


def now() -> float:
    torch.cuda.synchronize()
    return time.perf_counter()


def honest_case(problem, ref, shape: dict, seed: int, profile: str, keep_pristine: bool) -> tuple[Case, float]:
    t0 = now()
    case = Case(problem, ref, shape, seed, "cuda", torch.device("cuda", 0), keep_pristine, profile)
    made = now() - t0
    answer = ref.reference(dict(case.inputs))
    for name in problem.outputs:
        case.outputs[name].copy_(answer[name])
    del answer
    torch.cuda.synchronize()
    return case, made


def fenced_verify(case: Case, tolerance, release: bool) -> dict:
    """Case.verify's steps one by one, each fenced (the same calls in the same order)."""
    times = {}
    t = now()
    got = {name: out.clone() for name, out in case.outputs.items()}
    times["copy_out"], t = now() - t, now()
    pristine = case.pristine if case.pristine is not None else case.drawn_again()
    times["draw_again"], t = now() - t, now()
    expected = case.ref.reference(dict(pristine))
    times["reference"], t = now() - t, now()
    tol = (tolerance.rtol, tolerance.atol, tolerance.atol_rms, tolerance.acc_rtol)
    for name in case.problem.outputs:
        result = compare(got[name], expected[name], *tol, case._magnitude(pristine, name))
        assert result["ok"], result["report"]
    times["compare"], t = now() - t, now()
    _wipe(expected, got, release=release)
    times["wipe"], t = now() - t, now()
    assert all(same_bytes(tensor, pristine[name]) for name, tensor in case.inputs.items())
    times["inputs_equal"], t = now() - t, now()
    assert all(_guards_intact(buffer, case.outputs[name].numel()) for name, buffer in case.buffers.items())
    times["guards"] = now() - t
    return times


def measure(problem, ref, shape, seed, profile, keep_pristine, release, reps) -> dict:
    steps: dict[str, list[float]] = {s: [] for s in STEPS}
    whole = []
    tolerance = problem.tolerance("cuda")
    for r in range(reps):
        case, made = honest_case(problem, ref, shape, seed + r, profile, keep_pristine)
        steps["case"].append(made)
        for name, value in fenced_verify(case, tolerance, release).items():
            steps[name].append(value)
        case, _ = honest_case(problem, ref, shape, seed + r, profile, keep_pristine)
        t0 = time.perf_counter()
        assert case.verify(tolerance, release=release)["ok"]
        whole.append(time.perf_counter() - t0)
        del case
    row = {s: 1e3 * statistics.median(v) for s, v in steps.items()}
    row["verify"] = 1e3 * statistics.median(whole)
    return row


def show(title: str, rows: list[tuple[str, dict]]) -> None:
    print(f"\n{title} (ms, medians)")
    head = f"{'shape':>18s} {'profile':>10s} " + " ".join(f"{s:>12s}" for s in (*STEPS, "verify"))
    print(head)
    for label, row in rows:
        key, profile = label
        print(f"{key:>18s} {profile:>10s} " + " ".join(f"{row[s]:12.2f}" for s in (*STEPS, "verify")))
    total = {s: sum(r[s] for _, r in rows) for s in (*STEPS, "verify")}
    print(f"{'sum':>18s} {'':>10s} " + " ".join(f"{total[s]:12.2f}" for s in (*STEPS, "verify")))


def cold_child(problem, timed_first: bool = False) -> None:
    """In a fresh process (as a harness child: torch and the reference imported before the clock starts), the
    device's start, then every verification check twice and a timed output's check on every benchmark shape twice:
    the first pass pays what a new process pays once (kernels loaded on first use, cuBLAS's start)."""
    ref = problem.reference_module()
    torch.backends.cuda.matmul.allow_tf32 = False
    t0 = time.perf_counter()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    line = {"device_start_s": time.perf_counter() - t0}
    tolerance = problem.tolerance("cuda")
    passes = [
        (
            "verify",
            True,
            True,
            [(p, sh, sh["seed"] + s[0]) for p, s in verification_plan(problem) for sh in problem.tests],
        ),
        ("timed_outputs", False, False, [("spec", sh, sh["seed"]) for sh in problem.benchmarks]),
    ]
    if timed_first:
        passes.reverse()
    for name, keep, release, shapes in passes:
        for attempt in ("first", "again"):
            slowest = []
            t = now()
            for profile, shape, seed in shapes:
                t1 = now()
                case, _ = honest_case(problem, ref, shape, seed, profile, keep)
                assert case.verify(tolerance, release=release)["ok"]
                slowest.append((now() - t1, f"{shape_key(shape)} {profile}"))
            line[f"{name}_{attempt}_s"] = now() - t
            if attempt == "first":
                line[f"{name}_first_slowest"] = [f"{label} {1e3 * s:.1f} ms" for s, label in sorted(slowest)[-4:]]
    print(json.dumps(line))


def cold(problem_name: str) -> None:
    """cold_child in fresh processes: the harness's environment (a new HOME each time, so nothing the driver caches
    there survives), then twice with one HOME kept, then with every module loaded at the device's start."""
    kept = tempfile.mkdtemp()
    runs = [("new HOME", {}, None, []), ("kept HOME, 1", {}, kept, []), ("kept HOME, 2", {}, kept, [])]
    runs.append(("new HOME, timed outputs first", {}, None, ["--timed-first"]))
    runs.append(("CUDA_MODULE_LOADING=EAGER", {"CUDA_MODULE_LOADING": "EAGER"}, None, []))
    print("\nA new process's first checks against its later ones (s)")
    for label, extra, home, flags in runs:
        env = {**os.environ, **extra, "HOME": home or tempfile.mkdtemp()}
        argv = [sys.executable, __file__, problem_name, "--cold-child", *flags]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        print(f"{label}: {done.stdout.strip() or done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", nargs="?", default="fp8_gemm_kmajor")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="only the fresh processes' first checks against later ones")
    parser.add_argument("--cold-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--timed-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    problem = load_problem(args.problem)
    if args.cold_child:
        return cold_child(problem, args.timed_first)
    if args.cold:
        return cold(args.problem)
    ref = problem.reference_module()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.set_device(0)
    print(torch.cuda.get_device_name(0), torch.__version__)
    warm, _ = honest_case(problem, ref, problem.tests[0], 1, "spec", True)  # the context, cuBLAS, the allocator
    warm.verify(problem.tolerance("cuda"))
    verification = []
    for profile, seeds in verification_plan(problem):
        for shape in problem.tests:
            row = measure(problem, ref, shape, shape["seed"] + seeds[0], profile, True, True, args.reps)
            verification.append(((shape_key(shape), profile), row))
    show("Verification checks before timing, one input set each (release=True)", verification)
    print(
        f"checks before timing: {sum(len(s) for _, s in verification_plan(problem)) * len(problem.tests)}, "
        f"after: {problem.trials * len(problem.tests) + (len(problem.inputs) - 1) * len(recheck_shapes(problem.tests))}"
    )
    timed = []
    for shape in problem.benchmarks:
        row = measure(problem, ref, shape, shape["seed"], "spec", False, False, args.reps)
        timed.append(((shape_key(shape), "spec"), row))
    show("A timed output's check on each benchmark shape (keep_pristine=False, release=False)", timed)
    calls(problem, ref, args.reps)
    cold(args.problem)


def calls(problem, ref, reps: int) -> None:
    """A timed call's own overhead per benchmark shape: its input set drawn (Case, keep_pristine=False), the look
    for poison left in its output, and CallTimer's idle call (flush, events, polling, device-wide synchronisation)."""
    device = torch.device("cuda", 0)
    flush = L2Flusher(device)
    timer = CallTimer(flush, torch.cuda.default_stream(device), idle_run=flush.nudge)
    print(f"\nA timed call's overhead (ms, medians of {10 * reps})")
    print(f"{'shape':>18s} {'case':>10s} {'left_poison':>12s} {'idle call':>10s}")
    for shape in problem.benchmarks:
        made, poison, idle = [], [], []
        for r in range(10 * reps):
            t = now()
            case = Case(problem, ref, shape, r, "cuda", device, False)
            made.append(now() - t)
            t = now()
            case.left_poison()
            poison.append(now() - t)
            t = now()
            timer.idle()
            idle.append(now() - t)
            del case
        print(
            f"{shape_key(shape):>18s} " + " ".join(f"{1e3 * statistics.median(v):10.3f}" for v in (made, poison, idle))
        )


if __name__ == "__main__":
    main()
