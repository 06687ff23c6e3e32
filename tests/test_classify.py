"""How the parent turns what the child reported into a verdict (reports written here by hand)."""

import pytest

from ksci.evaluate import EnvironmentProblem, classify
from ksci.isolate import ChildOutcome
from ksci.problem import load_problem
from ksci.results import Status, Verdict, geomean

PROBLEM = load_problem("fp8_gemm")
STARTED = {"event": "started", "fingerprint": {"gpu": "NVIDIA H200"}}
SHAPE = {"m": 1024, "n": 1536, "k": 7168, "seed": 1}
WORK = {"flops": 2.0 * 1024 * 1536 * 7168, "bytes": 1024 * 7168 + 1536 * 7168 + 2 * 1024 * 1536}


def _timing(kernel_us: float) -> dict:
    stats = {"median_us": kernel_us, "iqr_us": 0.1, "min_us": kernel_us, "reps": 10}
    ref = {**stats, "median_us": 1000.0}
    return {"event": "timing", "shape": SHAPE, **WORK, "kernel": stats, "reference": ref, "vendor": None}


def _verdict(*messages, timed_out=False, returncode=0) -> Verdict:
    outcome = ChildOutcome(messages=list(messages), returncode=returncode, timed_out=timed_out, output="log")
    return classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"))


def test_ok_with_timings_and_ratios():
    v = _verdict(STARTED, {"event": "loaded"}, _timing(100.0), {"event": "result", "status": "ok"})
    assert v.status == Status.OK and v.geomean_us == pytest.approx(100.0)
    assert v.speedup_vs_reference == pytest.approx(10.0)
    assert v.vendor_geomean_us is None  # no vendor timing on some shape: no vendor geomean
    assert v.speed_of_light_geomean_us == pytest.approx(WORK["flops"] / 1979e12 * 1e6)


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
    from ksci.evaluate import pin_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert pin_device("1", "cuda") == {"CUDA_VISIBLE_DEVICES": "1"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert pin_device("1", "cuda") == {"CUDA_VISIBLE_DEVICES": "6"}
    with pytest.raises(EnvironmentProblem, match="not among the 2"):
        pin_device("2", "cuda")
    assert pin_device("0", "rocm") == {"HIP_VISIBLE_DEVICES": "0"}
