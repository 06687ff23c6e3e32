"""How the parent turns what the child reported into a verdict (reports written here by hand)."""

import pytest

from ksci.evaluate.judge.classify import classify
from ksci.evaluate.options import EnvironmentProblem
from ksci.evaluate.results import Status, Verdict, geomean
from ksci.evaluate.run.isolate import ChildOutcome
from ksci.problem.spec import load_problem

PROBLEM = load_problem("fp8_gemm")
STARTED = {"event": "started", "fingerprint": {"gpu": "NVIDIA H200"}}
SHAPE = {"m": 1024, "n": 1536, "k": 7168, "seed": 1}
WORK = {"flops": 2.0 * 1024 * 1536 * 7168, "bytes": 1024 * 7168 + 1536 * 7168 + 2 * 1024 * 1536}


def _timing(kernel_us: float, **integrity) -> dict:
    stats = {"median_us": kernel_us, "iqr_us": 0.1, "min_us": kernel_us, "reps": 20}
    ref = {**stats, "median_us": 1000.0}
    # Two batches of ten calls, a 150 us flush before each, 40 us of host latency per call and 12 us until the device
    # is seen idle, as for a call that does nothing; 8 of the 20 outputs checked in full.
    honest = {"calls": 20, "checked": 8, "flush_us": 150.0, "gap_us": 41.0, "gap_idle_us": 40.0}
    honest.update(tail_us=12.5, tail_idle_us=12.0, sync_us=4.0, sync_idle_us=3.5, shape_host_us=60_000.0)
    honest["samples_us"] = [kernel_us + 0.01 * (i % 7) for i in range(20)]
    return {
        "event": "timing",
        "shape": SHAPE,
        "key": "1024x1536x7168",
        **WORK,
        "kernel": stats,
        "integrity": {**honest, **integrity},
        "reference": ref,
        "vendor": None,
    }


def _verdict(*messages, timed_out=False, returncode=0, lingered=False) -> Verdict:
    outcome = ChildOutcome(messages=list(messages), returncode=returncode, timed_out=timed_out, output="log")
    outcome.lingered = lingered
    return classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"))


def test_ok_with_timings_and_ratios():
    v = _verdict(STARTED, {"event": "loaded"}, _timing(100.0), {"event": "result", "status": "ok"})
    assert v.status == Status.OK and v.geomean_us == pytest.approx(100.0)
    assert v.speedup_vs_reference == pytest.approx(10.0)
    assert v.vendor_geomean_us is None  # no vendor timing on some shape: no vendor geomean
    assert v.speed_of_light_geomean_us == pytest.approx(WORK["flops"] / 1979e12 * 1e6)


OK_RUN = (STARTED, {"event": "loaded"})
RESULT_OK = {"event": "result", "status": "ok"}


@pytest.mark.parametrize(
    ("integrity", "reason"),
    [
        # A timer that reports half: the host saw 50 us per call more than the events (a 100 us call said to take 100).
        ({"gap_us": 90.0}, "a timer that reports less than the call took"),
        # The device busy 80 us after each end event: on its own clock, and for the host's synchronisation.
        ({"tail_us": 12.0 + 90.0, "sync_us": 3.5 + 80.0}, "stream of the kernel's own"),
        ({"checked": 2}, "only 2 of 20 timed outputs were checked"),
        ({"calls": 10}, "timed outputs were checked"),  # fewer calls than timed repetitions
        ({"samples_us": [100.0] * 10 + [5.0] * 10}, "two groups"),
    ],
)
def test_timings_the_clocks_disagree_with_are_suspicious(integrity, reason):
    v = _verdict(*OK_RUN, _timing(100.0, **integrity), RESULT_OK)
    assert v.status == Status.SUSPICIOUS and reason in v.message


def test_a_little_host_latency_or_device_tail_is_not_doubted():
    """Under the floors (30 us host, 60 us device) an honest call's jitter passes, however short the call; and a
    slow wake-up of the host after a long call (on the device's clock alone) is not work left running."""
    v = _verdict(*OK_RUN, _timing(100.0, gap_us=65.0, tail_us=12.0 + 30.0, sync_us=3.5 + 30.0), RESULT_OK)  # H100
    assert v.status == Status.OK, v.message
    v = _verdict(*OK_RUN, _timing(270.0, tail_us=12.0 + 41.0, sync_us=5.0), RESULT_OK)  # seen on an H100
    assert v.status == Status.OK, v.message


def _timed(messages: list[dict], arrivals: list[float]) -> Verdict:
    outcome = ChildOutcome(messages=messages, arrivals=arrivals, returncode=0, output="log")
    return classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"))


def test_the_childs_clock_is_held_against_the_parents():
    """The child says the shape took 60 ms; the parent saw its `shape` and `timing` messages 60 ms or 200 ms apart."""
    shape = {"event": "shape", "key": "1024x1536x7168"}
    messages = [*OK_RUN, shape, _timing(100.0), RESULT_OK]
    assert _timed(messages, [0.0, 0.001, 0.002, 0.0621, 0.063]).status == Status.OK
    slow = _timed(messages, [0.0, 0.001, 0.002, 0.202, 0.203])
    assert slow.status == Status.SUSPICIOUS and "the parent's 200.0 ms" in slow.message
    missing = _timed([*OK_RUN, _timing(100.0), RESULT_OK], [0.0, 0.001, 0.0621, 0.063])
    assert missing.status == Status.SUSPICIOUS and "no `shape` message" in missing.message


@pytest.mark.parametrize(
    "bad",
    [
        {"event": "result", "status": "ok", "extra": 1},  # unknown field
        {"event": "made_up"},  # unknown event
        {"event": "check", "shape": SHAPE, "seed": "1"},  # missing and mistyped fields
    ],
)
def test_a_malformed_message_means_never_ok(bad):
    v = _verdict(*OK_RUN, _timing(100.0), bad, RESULT_OK)
    assert v.status == Status.SUSPICIOUS and "malformed" in v.message


def test_unparsable_report_lines_mean_never_ok():
    outcome = ChildOutcome(messages=[*OK_RUN, _timing(100.0), RESULT_OK], returncode=0, output="", bad_messages=1)
    v = classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"))
    assert v.status == Status.SUSPICIOUS and "1 malformed" in v.message


def test_an_ok_with_fewer_reports_than_the_run_makes_is_not_ok():
    outcome = ChildOutcome(messages=[*OK_RUN, _timing(100.0), RESULT_OK], returncode=0, output="")
    v = classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"), {"checks": 3, "timings": 2})
    assert v.status == Status.SUSPICIOUS and "fewer than the run must make" in v.message


def test_a_timing_longer_than_the_child_ran_is_suspicious():
    outcome = ChildOutcome(messages=[*OK_RUN, _timing(100.0), RESULT_OK], returncode=0, output="", wall_s=0.001)
    v = classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"))
    assert v.status == Status.SUSPICIOUS and "ran" in v.message


def test_faster_than_light_is_suspicious_not_ok():
    v = _verdict(STARTED, {"event": "loaded"}, _timing(1.0), {"event": "result", "status": "ok"})
    assert v.status == Status.SUSPICIOUS and "speed of light" in v.message


@pytest.mark.parametrize(
    ("messages", "kwargs", "status"),
    [
        ([STARTED], {"timed_out": True, "returncode": -9}, Status.TIMEOUT),
        ([STARTED, {"event": "load_error", "message": "undefined symbol: helper"}], {}, Status.LOAD_ERROR),
        ([STARTED, {"event": "loaded"}, {"event": "result", "status": "wrong", "message": "3 of 9"}], {}, Status.WRONG),
        (
            [STARTED, {"event": "loaded"}, {"event": "runtime_error", "message": "illegal memory access"}],
            {"returncode": 3},
            Status.RUNTIME_ERROR,
        ),
        ([STARTED, {"event": "loaded"}], {"returncode": -11}, Status.RUNTIME_ERROR),
        # Still running long after its result (ksci.evaluate.run.isolate.EXIT_GRACE_S), so killed: whatever it reported.
        (
            [*OK_RUN, {"event": "result", "status": "ok"}],
            {"lingered": True, "returncode": -9},
            Status.RUNTIME_ERROR,
        ),
    ],
)
def test_failure_classes(messages, kwargs, status):
    v = _verdict(*messages, **kwargs)
    assert v.status == status and v.message and v.harness_log == "log"


def test_a_harness_that_never_started_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem, match="did not start"):
        _verdict(returncode=1)


def test_geomean():
    assert geomean([1.0, 100.0]) == pytest.approx(10.0)
    assert geomean([]) is None and geomean([1.0, None]) is None


def test_pinning_respects_the_gpus_the_process_may_use(monkeypatch):
    from ksci.evaluate.run.visibility import pin_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert pin_device("1", "cuda") == {"CUDA_VISIBLE_DEVICES": "1"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert pin_device("1", "cuda") == {"CUDA_VISIBLE_DEVICES": "6"}
    with pytest.raises(EnvironmentProblem, match="not among the 2"):
        pin_device("2", "cuda")
    assert pin_device("0", "rocm") == {"HIP_VISIBLE_DEVICES": "0"}


def test_the_gpu_window_says_how_much_of_it_was_the_harness_starting(monkeypatch):
    """run_phases stamps the window with when "started", "loaded" and the "result" came (ksci.evaluate.run.isolate
    measures them): the start-up, and after the result the child's exit."""
    from ksci.evaluate import host_stages
    from ksci.evaluate.options import EvaluationOptions
    from ksci.evaluate.results import CompileResult

    first_s = {"started": 2.5, "loaded": 2.75, "result": 4.0}
    outcome = ChildOutcome(messages=[*OK_RUN, _timing(100.0), RESULT_OK], returncode=0, output="", first_s=first_s)
    monkeypatch.setattr(host_stages, "run_harness", lambda problem, library, options, held_out=None: outcome)
    compiled = CompileResult(ok=True, target="cuda", arch="sm_90a", toolchain="nvcc", command=[], log="")
    options = EvaluationOptions(phases=("benchmark",), device="1")
    window = host_stages.run_phases(PROBLEM, compiled, options).fingerprint["gpu_window"]
    assert window["started_s"] == 2.5 and window["loaded_s"] == 2.75 and window["result_s"] == 4.0
    assert window["device"] == "1" and window["phases"] == ["benchmark"] and window["start"] <= window["end"]
    assert "exited_s" not in window

    # Handed over at its result (ksci.devices.Lease): the GPU was the run's until then, its exit came later.
    outcome.handed_over_s, outcome.wall_s = 4.01, 4.25
    window = host_stages.run_phases(PROBLEM, compiled, options).fingerprint["gpu_window"]
    assert window["end"] == pytest.approx(window["start"] + 4.01) and window["exited_s"] == 4.25
