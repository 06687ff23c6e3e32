"""The child process that loads one candidate library, checks it and times it.

Run as `python -m ksci.evaluate.harness.child REQUEST.json --report-fd N`. It imports torch and the problem's reference,
then waits for the go-ahead on its stdin (ksci.evaluate.run.isolate.Child): one JSON line, {"env": {...}, "library": PATH} with
the variable that shows it its GPU (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES), set before the GPU runtime starts,
and the candidate's library (none: time the baselines only). The parent starts it before its GPU is free, maybe
before it knows the candidate (ksci.evaluate.run.harness_process.SpareHarnesses), so that Python and torch start while
another candidate holds the GPU. End of file without a go-ahead ends it (exit 5): its parent gave up. After the
go-ahead, stdin stays open until the GPU is clear to time on (no earlier run's process still exiting on it); the child
times nothing before that end of file (await_clear). By hand: `echo '{}' | python -m ksci.evaluate.harness.child ...`.
It reports JSON lines on fd N: started, loaded, check (one per input set), timing (one per benchmark shape), and a
final result. A crash or hang simply ends the process; the parent (ksci.evaluate.judge.classify) turns what it saw into a
verdict. The input sets it checks and times are ksci/evaluate/harness/cases.py; the clocks, timing.py.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import sys
import time
import traceback

import torch

from ksci.evaluate.harness.cases import Case
from ksci.evaluate.harness.check import relative_error
from ksci.evaluate.harness.plan import TRIAL_SEED_STEP, held_out_plan, recheck_shapes, verification_plan
from ksci.evaluate.harness.timing import (
    CallTimer,
    L2Flusher,
    TimedCalls,
    TimingPolicy,
    idle_summary,
    precise,
    raced_out,
    slower_idle,
    time_calls,
)
from ksci.evaluate.judge.timing_rules import summarise
from ksci.evaluate.sandbox.harness import confine_self, drop_network, limit_resources
from ksci.problem.spec import load_problem, shape_key

REVERIFY_SEED_OFFSET = 1_000_003
WARMUP_SEED_OFFSET = 2_000_029
ROTATIONS = 3  # input sets the baselines rotate over
# Of each of the first two batches of timed calls, this many outputs are checked in full, and one of each later
# batch, chosen at random after the batch ran; every other output is still looked at for poison left in it (a NaN
# where the kernel wrote nothing). A kernel that skips half its calls passes 6 random checks with odds 1 in 64 per
# shape (and leaves poison behind unless it writes something in place of the work).
CHECKED_PER_BATCH = 3
CHECKED_BATCHES = 2
IDLE_PER_BATCH = 2  # idle calls among a batch's timed calls, at places drawn at random
CASE_MEMORY_SHARE = 0.25  # the most of the free device memory one batch's input sets may take
_UNPREDICTABLE = random.SystemRandom()  # seeds and sampled checks: nothing the candidate can replay or predict
VENDOR_RELATIVE_ERROR = 1e-2
NO_GO_AHEAD = 5  # exit status of a child whose parent closed its stdin without the go-ahead


class KernelFailed(Exception):
    """The candidate returned an error code or the device reported an error."""


class Reporter:
    def __init__(self, fd: int):
        self.stream = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **fields) -> None:
        self.stream.write(json.dumps({"event": event, **fields}) + "\n")
        self.stream.flush()


class Candidate:
    """The entry point of the shared library, called with the problem's argument order."""

    def __init__(self, library: str, entry_name: str, arg_names: tuple[str, ...]):
        self.lib = ctypes.CDLL(library, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.fn = getattr(self.lib, entry_name)
        self.fn.restype = ctypes.c_int
        self.arg_names = arg_names

    def __call__(self, tensors: dict, shape: dict, stream: torch.cuda.Stream) -> None:
        args = []
        for name in self.arg_names:
            if name == "stream":
                args.append(ctypes.c_void_p(stream.cuda_stream))
            elif name in tensors:
                args.append(ctypes.c_void_p(tensors[name].data_ptr()))
            else:
                args.append(ctypes.c_int(int(shape[name])))
        code = self.fn(*args)
        if code != 0:
            raise KernelFailed(f"entry point returned error code {code}")


class Session:
    def __init__(self, request: dict, reporter: Reporter, problem, ref):
        """`problem` and its reference module `ref` were loaded before the go-ahead (main)."""
        self.request, self.reporter = request, reporter
        self.target = request["target"]
        self.problem, self.ref = problem, ref
        self.device = torch.device("cuda", 0)
        torch.cuda.set_device(self.device)
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference is exact float32
        torch.backends.cudnn.allow_tf32 = False
        # The legacy default stream: work a candidate puts on it, on the per-thread default stream or on any other
        # blocking stream is ordered with the events around the call, so it is timed (docs/threat-model.md).
        self.stream = torch.cuda.default_stream(self.device)
        self.policy = TimingPolicy(**request.get("policy", {}))
        self.candidate: Candidate | None = None
        self.sandbox: dict = {}

    def run(self) -> None:
        self.reporter.send("started", fingerprint=device_fingerprint())
        if self.request.get("library") is None:  # baselines only: the reference and the vendor library
            await_clear()
            with torch.cuda.stream(self.stream):
                self.baselines_all()
            self.reporter.send("result", status="ok")
            return
        self.sandbox["network"] = drop_network() if self.request.get("isolate_network", True) else "not requested"
        # No capability, and the syscall filter on every thread, before the candidate's code is loaded.
        self.sandbox.update(confine_self(self.reporter.stream.fileno()))
        self.reporter.send("sandbox", **self.sandbox)
        try:
            self.candidate = Candidate(self.request["library"], self.problem.entry_name, self.problem.entry_args)
        except (OSError, AttributeError) as exc:
            self.reporter.send("load_error", message=str(exc))
            return
        self.reporter.send("loaded")
        with torch.cuda.stream(self.stream):
            phases = self.request.get("phases", ["verify", "benchmark"])
            if "verify" in phases and not (self.verify_all(0) and self.verify_held_out()):
                return
            if "benchmark" in phases:
                await_clear()
                if not (self.benchmark_all() and self.verify_all(REVERIFY_SEED_OFFSET)):
                    return
        self.reporter.send("result", status="ok")

    def verify_all(self, seed_offset: int) -> bool:
        """Every test shape on `trials` seeds of the `spec` inputs, then on one seed of each other declared profile
        (problem.yaml `inputs`): the extra profiles cost one input set per shape, not `trials`. After timing
        (seed_offset REVERIFY_SEED_OFFSET) `spec` again on every test shape, the other profiles on recheck_shapes
        (ksci/evaluate/harness/plan.py). Every set is drawn on a fresh seed: the answer to an input set checked
        before timing would answer nothing asked after it (a kernel that kept it could replay it otherwise)."""
        tests = self.request.get("tests") or self.problem.tests
        for profile, seeds in verification_plan(self.problem):
            for shape in tests if profile == "spec" or not seed_offset else recheck_shapes(tests):
                for step in seeds:
                    case = self.case(shape, shape["seed"] + seed_offset + step, profile=profile)
                    if not self.check(case):
                        return False
        return True

    def verify_held_out(self) -> bool:
        """The go-ahead's held-out shapes (in the problem's shape contract, never listed, drawn by the parent per
        evaluation: ksci/problem/contract.py), each on `spec` and one other declared profile (held_out_plan)."""
        for shape in self.request.get("held_out") or []:
            for profile, step in held_out_plan(self.problem):
                try:
                    case = self.case(shape, shape["seed"] + step, profile=profile)
                except Exception as exc:  # the reference refuses a shape of a derived contract: not the kernel's fault
                    faults = (getattr(torch, "AcceleratorError", ()), torch.OutOfMemoryError)
                    if self.problem.shape_contract or isinstance(exc, faults):
                        raise  # a declared contract's shape, a device fault or memory the kernel took: never a refusal
                    why = f"{type(exc).__name__}: {exc}"[:500]
                    self.reporter.send(
                        "skipped", shape=_plain(shape), seed=shape["seed"] + step, profile=profile, reason=why
                    )
                    continue
                if not self.check(case, phase="held-out"):
                    return False
        return True

    def check(self, case: Case, phase: str = "verify") -> bool:
        case.poison()
        self.call(case)
        return self.report_check(case, case.verify(self.problem.tolerance(self.target, case.profile)), phase)

    def report_check(self, case: Case, result: dict, phase: str) -> bool:
        shape = _plain(case.shape)
        self.reporter.send("check", phase=phase, shape=shape, seed=case.seed, profile=case.profile, **result)
        if not result["ok"]:
            where = f"wrong on {case.profile}: {shape_key(shape)} seed {case.seed}"
            if phase == "held-out":
                where = f"wrong on held-out shape {shape_key(shape)} seed {case.seed}: on {case.profile} inputs"
            self.reporter.send("result", status="wrong", message=f"{where}: {result['report']}")
        return result["ok"]

    def call(self, case: Case) -> None:
        self.candidate(case.tensors, case.shape, self.stream)
        self.stream.synchronize()

    def benchmark_all(self) -> bool:
        flush = L2Flusher(self.device)
        shapes = self.request.get("benchmarks") or self.problem.benchmarks
        return all(self.benchmark_shape(shape, flush) for shape in shapes)

    def benchmark_shape(self, shape: dict, flush: L2Flusher) -> bool:
        """Time the candidate on one shape; every timed call gets input values of its own and a poisoned output.

        Warm-up runs on an input set that is never timed (and is checked). Then batches: a batch is a set of new
        input sets with fresh random seeds, each made and poisoned just before its one timed call, outside the timed
        region (CallTimer: one call at a time, the device idle between calls), so that no call can find another's
        inputs in memory. After the batch every output is looked at for poison, and CHECKED_PER_BATCH of them,
        drawn at random once the batch has run, are checked in full against the reference. So no timed call can
        profit from another one: a call that skips its work leaves poison or a wrong answer behind, and which
        outputs are checked cannot be known in advance.
        """
        self.reporter.send("shape", key=shape_key(shape))
        shape_start = time.perf_counter()
        warm = self.warm_up(shape)
        if warm is None:
            return False
        timer = CallTimer(flush, self.stream, idle_run=flush.nudge)
        before = timer.calibrate()
        batch = self.batch_size(warm)
        del warm
        calls = self.timed_batches(shape, timer, batch)
        if calls is None:
            return False
        idle = slower_idle(before, idle_summary(calls.idle))  # the host before and among the calls: load comes and goes
        timing = {"kernel": summarise(calls.kernel_us), "integrity": calls.integrity(idle)}
        if self.request.get("time_baselines", True):
            timing.update(self.time_baselines(self.rotated_cases(shape), flush))
        # The child's own clock over the whole shape, which the parent holds against its clock (ksci/evaluate/judge/timing_rules.py).
        timing["integrity"]["shape_host_us"] = (time.perf_counter() - shape_start) * 1e6
        self.reporter.send("timing", shape=_plain(shape), key=shape_key(shape), **self.work(shape), **timing)
        return True

    def warm_up(self, shape: dict) -> Case | None:
        """The untimed input set, checked, then the policy's warm-up calls on it; None when its check fails."""
        warm = self.case(shape, shape["seed"] + WARMUP_SEED_OFFSET)
        if not self.check(warm, phase="benchmark"):
            return None
        for _ in range(self.policy.warmup):
            self.candidate(warm.tensors, shape, self.stream)
        torch.cuda.synchronize()
        return warm

    def timed_batches(self, shape: dict, timer: CallTimer, batch: int) -> TimedCalls | None:
        """Batches of timed calls, each checked, until the times are precise enough (after min_reps and two batches
        at least), the time budget is spent or max_reps is reached; None when a checked output is wrong. With the
        go-ahead's `race` (ksci evolve --race: the run's best median per shape), also once the kernel is known to
        lose the shape (raced_out): it is timed as rigorously per call, on fewer calls."""
        calls = TimedCalls()
        start = time.monotonic()
        incumbent = self.request.get("race", {}).get(shape_key(shape))
        while len(calls.kernel_us) < self.policy.max_reps:
            cases = self.time_batch(shape, timer, batch, calls)
            calls.batches += 1
            if not self.check_batch(cases, calls):
                return None
            del cases
            samples = calls.kernel_us
            if len(samples) < self.policy.min_reps or len(samples) < 2 * batch:
                continue
            if raced_out(samples, incumbent):
                calls.raced_against_us = incumbent
                break
            if precise(samples, self.policy.target_precision) or time.monotonic() - start > self.policy.budget_s:
                break
        return calls

    def time_batch(self, shape: dict, timer: CallTimer, batch: int, calls: TimedCalls) -> list[Case]:
        """`batch` new input sets, each drawn just before its one timed call (recorded in `calls`), and IDLE_PER_BATCH
        idle calls before calls drawn at random (the host's latency as the calls find it, recorded in `calls.idle`)."""
        cases = []
        idle_before = set(_UNPREDICTABLE.sample(range(batch), min(IDLE_PER_BATCH, batch)))
        for i in range(batch):
            # Drawn just before its call: no call can find a later call's inputs in memory and work ahead.
            case = self.case(shape, _UNPREDICTABLE.randrange(2**62), keep_pristine=False)
            cases.append(case)
            torch.cuda.synchronize()  # the drawing is done before the host clock starts
            if i in idle_before:
                calls.idle.append(timer.idle())
            calls.add(timer(lambda case=case: self.candidate(case.tensors, shape, self.stream)))
        return cases

    def check_batch(self, cases: list[Case], calls: TimedCalls) -> bool:
        """Checks in full the outputs drawn once the batch has run, and any output that still holds poison."""
        draws = CHECKED_PER_BATCH if calls.batches <= CHECKED_BATCHES else 1
        sampled = set(_UNPREDICTABLE.sample(range(len(cases)), min(draws, len(cases))))
        for i, case in enumerate(cases):
            if i in sampled or case.left_poison():
                calls.checked += 1
                tolerance = self.problem.tolerance(self.target, case.profile)
                if not self.report_check(case, case.verify(tolerance, release=False), "timed-output"):
                    return False
        return True

    def batch_size(self, case: Case) -> int:
        """Input sets per batch: the policy's batch, fewer where they would take too much of the device's memory."""
        free, _total = torch.cuda.mem_get_info(self.device)
        fits = int(CASE_MEMORY_SHARE * free // max(1, case.nbytes()))
        return max(2, min(self.policy.batch, fits))

    def baselines_all(self) -> None:
        flush = L2Flusher(self.device)
        for shape in self.request.get("benchmarks") or self.problem.benchmarks:
            cases = self.rotated_cases(shape)
            timing = self.time_baselines(cases, flush)
            self.reporter.send("baseline", shape=_plain(shape), key=shape_key(shape), **self.work(shape), **timing)

    def work(self, shape: dict) -> dict:
        """What the speed of light is computed from."""
        return {"flops": float(self.ref.flops(shape)), "bytes": float(self.ref.bytes_moved(shape))}

    def rotated_cases(self, shape: dict) -> list[Case]:
        """The input sets the baselines (reference, vendor library) are timed on, in rotation."""
        return [self.case(shape, shape["seed"] + r * TRIAL_SEED_STEP) for r in range(ROTATIONS)]

    def case(self, shape: dict, seed: int, keep_pristine: bool = True, profile: str = "spec") -> Case:
        return Case(self.problem, self.ref, shape, seed, self.target, self.device, keep_pristine, profile)

    def time_baselines(self, cases: list[Case], flush: L2Flusher) -> dict:
        reference = time_calls(
            lambda i: self.ref.reference(cases[i].inputs), ROTATIONS, flush, self.stream, self.policy
        )
        out = {"reference": reference}
        try:
            runners = [self.ref.vendor(c.tensors) for c in cases]
        except Exception as exc:  # a vendor library that rejects the shape is a fact to report, not a failure
            return {**out, "vendor_error": f"{type(exc).__name__}: {exc}"}
        if any(r is None for r in runners):
            return {**out, "vendor_error": "no vendor baseline on this platform"}
        try:
            name = self.problem.outputs[0]
            error = relative_error(runners[0]()[name], self.ref.reference(cases[0].inputs)[name])
            out["vendor"] = time_calls(lambda i: runners[i](), ROTATIONS, flush, self.stream, self.policy)
            # The library is a timing baseline, not a candidate: it must compute the same product (relative
            # L2 error under 1%), not meet the element-wise tolerance (cuBLASLt's FP8 accumulation misses it
            # on a few tenths of a percent of the elements).
            out["vendor_ok"] = error <= VENDOR_RELATIVE_ERROR
            out["vendor_relative_error"] = error
        except Exception as exc:
            out["vendor_error"] = f"{type(exc).__name__}: {exc}"
        return out


def _plain(shape: dict) -> dict:
    return {k: int(v) for k, v in shape.items()}


def device_fingerprint() -> dict:
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": props.name,
        "gpu_arch": getattr(props, "gcnArchName", None) or f"sm_{props.major}{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "gpu_memory_bytes": props.total_memory,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "hip_runtime": torch.version.hip,
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES"),
        # Which physical GPU this was, whatever its index: lets a run check that its pinning held.
        "gpu_uuid": str(props.uuid) if getattr(props, "uuid", None) is not None else None,
    }


def await_go_ahead() -> dict | None:
    """The parent's go-ahead from stdin, or None at end of file. Stdin stays open until the GPU is clear to time
    on (await_clear)."""
    line = sys.stdin.readline()
    go = json.loads(line) if line.strip() else None
    if go is not None and not (
        isinstance(go, dict) and isinstance(go.get("env", {}), dict) and isinstance(go.get("library", ""), str)
    ):
        raise ValueError(
            f"the go-ahead must be a JSON object with an optional env object and library path, not {line.strip()!r}"
        )
    return go


def await_clear() -> None:
    """Wait until the parent closes stdin: no earlier run's process is still exiting on this GPU (their teardown
    overlaps this run's start, never its timed calls: ksci.devices.Lease)."""
    if not sys.stdin.closed:
        sys.stdin.read()
        sys.stdin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("request")
    parser.add_argument("--report-fd", type=int, required=True)
    args = parser.parse_args(argv)
    reporter = Reporter(args.report_fd)
    with open(args.request) as fh:
        request = json.load(fh)
    problem = load_problem(request["problem"])
    ref = problem.reference_module()  # imports torch's pieces the reference uses, before the GPU is ours
    go = await_go_ahead()
    if go is None:
        return NO_GO_AHEAD
    os.environ.update(go.get("env", {}))  # read by the GPU runtime when it starts, in Session below
    request["library"] = go.get("library")  # the candidate's, copied into this scratch folder; None: baselines only
    request["race"] = go.get("race") or {}  # shape key -> the run's best median (us) to race against
    request["held_out"] = go.get("held_out") or []  # shapes drawn by the parent for this evaluation alone
    limits = limit_resources(float(request.get("timeout_s", 900.0)))
    try:
        session = Session(request, reporter, problem, ref)
        session.sandbox["limits"] = limits
        session.run()
    except (
        KernelFailed,
        RuntimeError,
    ) as exc:  # torch raises RuntimeError (AcceleratorError) for device faults
        reporter.send("runtime_error", message=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-4000:])
        return 3
    except Exception as exc:
        reporter.send("harness_error", message=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-4000:])
        return 4
    return 0


def leave(code: int) -> None:
    """Exit at once with `code`, once everything is reported: no interpreter shutdown. Python's and torch's
    teardown (the caching allocator's blocks, the CUDA or HIP context, every module's finalisers) took a few tenths
    of a second of every harness run, inside the GPU window the parent holds until the child is gone (issue 28);
    the driver releases the process's context when it exits either way."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
