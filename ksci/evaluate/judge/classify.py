"""How the parent turns what the harness child reported (or failed to report) into a verdict.

The child is not trusted: its messages are checked against their schema (report_schema.py), an ok result must
come with at least the checks and timings an honest run of its phases makes (expected_reports), and its timings
must pass the timing rules (timing_rules.py: the parent's clock, the speed of light from ksci.problem.roofline).
"""

from __future__ import annotations

from signal import SIGSYS

from ksci.evaluate.harness.plan import held_out_plan, recheck_shapes
from ksci.evaluate.judge.report_schema import validate_message
from ksci.evaluate.judge.timing_rules import faster_than_light, outcome_timing_doubts
from ksci.evaluate.options import EnvironmentProblem, EvaluationOptions
from ksci.evaluate.results import CheckResult, ShapeTiming, Status, Timing, Verdict, geomean
from ksci.evaluate.run.isolate import EXIT_GRACE_S, ChildOutcome
from ksci.problem.roofline import peaks_for, speed_of_light_us
from ksci.problem.spec import Problem


def expected_reports(problem: Problem, options: EvaluationOptions, held_out: int = 0) -> dict:
    """The least an honest run of these phases reports (see Session.run in ksci.evaluate.harness.child).

    Verify: one check per test input set: `trials` of the `spec` profile and one of each other declared profile per
    test shape (verification_plan in ksci.evaluate.harness.child). Benchmark: per shape, the warm-up set and at
    least two timed outputs (two batches, at least one sampled in each; how many more depends on the batches), one
    timing; then every test shape's `spec` sets again on new seeds, the other profiles on recheck_shapes. Each timing
    also says how many timed outputs it checked, which ksci/evaluate/judge/timing_rules.py holds against the number of timed
    calls. `held_out`: how many held-out shapes the go-ahead named, each checked on held_out_plan's profiles.
    """
    extra = sum(1 for profile in problem.inputs if profile != "spec")
    tests = len(options.tests or problem.tests) * (problem.trials + extra)
    rechecks = (
        len(options.tests or problem.tests) * problem.trials
        + len(recheck_shapes(options.tests or problem.tests)) * extra
    )
    shapes = len(options.benchmarks or problem.benchmarks) if "benchmark" in options.phases else 0
    verified = tests + held_out * len(held_out_plan(problem))
    checks = (verified if "verify" in options.phases else 0) + ((3 * shapes + rechecks) if shapes else 0)
    return {"checks": checks, "timings": shapes}


def classify(problem: Problem, outcome: ChildOutcome, verdict: Verdict, expect: dict | None = None) -> Verdict:
    """Turn what the child reported (or failed to report) into a verdict.

    `expect` ({"checks": n, "timings": n}): the least an ok run reports; a result that claims ok with less is not.
    """
    invalid = _drop_invalid(outcome)
    started = outcome.last("started")
    verdict.fingerprint.update(started["fingerprint"] if started else {})
    if (sandbox := outcome.last("sandbox")) is not None:
        verdict.fingerprint["sandbox"] = {k: v for k, v in sandbox.items() if k != "event"}
    verdict.checks = [_check(m) for m in outcome.events("check")]
    if skipped := outcome.events("skipped"):  # held-out input sets the problem's reference could not make
        verdict.fingerprint["held_out_skipped"] = [{k: v for k, v in m.items() if k != "event"} for m in skipped]
    verdict.harness_log = outcome.output
    result = outcome.last("result")
    if (
        outcome.over_limit
    ):  # what it printed or reported went past ksci.evaluate.sandbox.bounds: nothing of it is trusted
        return _fail(verdict, Status.RUNTIME_ERROR, outcome.over_limit)
    if (denied := outcome.last("denied")) is not None:  # the child ended at the call (ksci.evaluate.sandbox.confine)
        return _fail(verdict, Status.RUNTIME_ERROR, f"crashed: denied system call {denied['syscall']}")
    if outcome.timed_out:
        return _fail(verdict, Status.TIMEOUT, f"killed after {outcome.wall_s:.0f} s (hard timeout)")
    if outcome.lingered:  # a harness leaves at once after its result; something else went on running in it
        why = f"the harness process was still running {EXIT_GRACE_S:.0f} s after reporting its result, and was killed"
        return _fail(verdict, Status.RUNTIME_ERROR, why)
    if (err := outcome.last("load_error")) is not None:
        return _fail(verdict, Status.LOAD_ERROR, err["message"])
    if started is None:
        raise EnvironmentProblem(f"the harness did not start (exit {outcome.returncode}):\n{outcome.output[-2000:]}")
    if result is not None and result["status"] == "wrong":
        return _fail(verdict, Status.WRONG, result.get("message", ""))
    if result is None or result["status"] != "ok":
        err = outcome.reported_error()
        why = err["message"] if err else _death(outcome.returncode)
        return _fail(verdict, Status.RUNTIME_ERROR, why)
    verdict.status = Status.OK
    verdict.timings = [shape_timing(m, problem, verdict.fingerprint.get("gpu", "")) for m in outcome.events("timing")]
    summarise_timings(verdict)
    doubts = invalid + _report_doubts(outcome, verdict) + _missing(outcome, expect or {})
    if doubts and verdict.status == Status.OK:
        return _fail(verdict, Status.SUSPICIOUS, "; ".join(doubts))
    return verdict


def _drop_invalid(outcome: ChildOutcome) -> list[str]:
    """Remove the messages that fail their schema; why, when there were any (such a run is never ok)."""
    timed = len(outcome.arrivals) == len(outcome.messages)  # outcomes written by hand (tests) may have no arrivals
    bounded = len(outcome.sent_after) == len(outcome.messages)
    valid, arrivals, sent_after, reasons = [], [], [], []
    for i, message in enumerate(outcome.messages):
        problem = validate_message(message)
        if problem is None:
            valid.append(message)
            arrivals.extend([outcome.arrivals[i]] if timed else [])
            sent_after.extend([outcome.sent_after[i]] if bounded else [])
        else:
            reasons.append(problem)
    outcome.messages, outcome.arrivals, outcome.sent_after = valid, arrivals, sent_after
    bad = outcome.bad_messages + len(reasons)
    if not bad:
        return []
    shown = f": {reasons[0]}" if reasons else ""
    return [f"the harness's report had {bad} malformed message(s){shown}"]


def _missing(outcome: ChildOutcome, expect: dict) -> list[str]:
    """Fewer checks or timings than an ok run makes; a held-out input set the reference could not make (`skipped`)
    counts as its check."""
    checks = len(outcome.events("check")) + len(outcome.events("skipped"))
    timings = len(outcome.events("timing"))
    if checks < expect.get("checks", 0) or timings < expect.get("timings", 0):
        return [
            f"the result says ok after {checks} checks and {timings} timings, "
            f"fewer than the run must make ({expect.get('checks', 0)} and {expect.get('timings', 0)})"
        ]
    return []


def _report_doubts(outcome: ChildOutcome, verdict: Verdict) -> list[str]:
    """A result reported ok must come with no failed check, and with timings the timing rules trust."""
    failed = ["a failed check was reported, yet the result says ok"] if any(not c.ok for c in verdict.checks) else []
    return failed + outcome_timing_doubts(outcome)


def _fail(verdict: Verdict, status: Status, message: str) -> Verdict:
    verdict.status, verdict.message = status, message
    return verdict


def _death(returncode: int | None) -> str:
    if returncode == -SIGSYS:  # a denied call whose SIGSYS handler was taken away (ksci.evaluate.sandbox.confine)
        return "crashed: denied system call (killed by SIGSYS; the call was not made)"
    if returncode is not None and returncode < 0:
        return f"the harness process was killed by signal {-returncode}"
    return f"the harness process exited with code {returncode} before reporting a result"


def _check(message: dict) -> CheckResult:
    fields = ("ok", "report", "mismatches", "total", "max_abs_error", "nan_or_inf")
    profile = message.get("profile", "spec")
    return CheckResult(shape=message["shape"], seed=message["seed"], profile=profile, **{k: message[k] for k in fields})


def shape_timing(message: dict, problem: Problem, gpu: str) -> ShapeTiming:
    def t(key: str) -> Timing | None:
        return Timing(**message[key]) if message.get(key) else None

    shape = message["shape"]
    peaks = peaks_for(gpu)
    sol = None
    if peaks is not None:
        sol = speed_of_light_us(message["flops"], message["bytes"], peaks, problem.roofline_compute)
    vendor = t("vendor") if message.get("vendor_ok", True) else None
    raced = message.get("integrity", {}).get("raced_against_us")
    return ShapeTiming(
        shape=shape, kernel=t("kernel"), reference=t("reference"), vendor=vendor, speed_of_light_us=sol,
        raced_against_us=raced,
    )  # fmt: skip


def baseline_geomeans(timings: list[ShapeTiming]) -> tuple[float | None, float | None]:
    """The reference's and the vendor library's geomeans over the shapes. A geomean over only some of the shapes
    would mislead, so a baseline missing anywhere gives None."""
    reference = geomean([s.reference.median_us if s.reference else None for s in timings])
    return reference, geomean([s.vendor.median_us if s.vendor else None for s in timings])


def summarise_timings(verdict: Verdict) -> None:
    timings = verdict.timings
    verdict.geomean_us = geomean([s.kernel.median_us if s.kernel else None for s in timings])
    verdict.reference_geomean_us, verdict.vendor_geomean_us = baseline_geomeans(timings)
    verdict.speed_of_light_geomean_us = geomean([s.speed_of_light_us for s in timings])
    if (why := faster_than_light(timings)) is not None:
        verdict.status, verdict.message = Status.SUSPICIOUS, why
