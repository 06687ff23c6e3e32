"""The baselines of an evolution (issue 28): the reference and the vendor library timed once per generation
(tasks/evaluation.py generation_baselines), and each candidate's benchmark timed alone and given their times
(ksci.evaluate.stage_order.with_baselines), instead of every candidate's harness timing them beside it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import ShapeTiming, Status, Timing, Verdict
from ksci.evaluate.setup import EvaluationSetup
from ksci.evaluate.stage_order import with_baselines
from ksci.problem.spec import load_problem

SHAPES = [{"m": 64, "n": 64, "k": 128}, {"m": 128, "n": 256, "k": 512}]


def _t(us: float) -> Timing:
    return Timing(median_us=us, iqr_us=0.01 * us, min_us=0.99 * us, reps=30)


def _timed(kernel_us: list[float]) -> Verdict:
    timings = [ShapeTiming(shape=dict(s), kernel=_t(us)) for s, us in zip(SHAPES, kernel_us, strict=True)]
    return Verdict(Status.OK, "fp8_gemm", "cuda", timings=timings, geomean_us=10.0, fingerprint={"gpu": "H100"})


def _baselines(reference_us: list[float], vendor_us: list[float | None]) -> Verdict:
    timings = [
        ShapeTiming(shape=dict(s), kernel=None, reference=_t(r), vendor=_t(v) if v else None)
        for s, r, v in zip(SHAPES, reference_us, vendor_us, strict=True)
    ]
    window = {"phases": ["baselines"], "start": 1.0, "end": 2.0, "device": "0"}
    return Verdict(Status.OK, "fp8_gemm", "cuda", timings=timings, fingerprint={"gpu_window": window})


def test_a_candidate_timed_alone_takes_each_shapes_baselines_and_their_geomeans():
    merged = with_baselines(_timed([5.0, 20.0]), _baselines([100.0, 400.0], [4.0, 16.0]))
    assert [t.reference.median_us for t in merged.timings] == [100.0, 400.0]
    assert [t.vendor.median_us for t in merged.timings] == [4.0, 16.0]
    assert merged.reference_geomean_us == pytest.approx(200.0)
    assert merged.vendor_geomean_us == pytest.approx(8.0)
    assert merged.speedup_vs_vendor == pytest.approx(0.8)  # the candidate's own geomean (10 us) is kept
    assert merged.fingerprint["baselines_gpu_window"]["phases"] == ["baselines"]


def test_a_shape_without_a_vendor_time_leaves_the_vendor_geomean_unknown():
    """As classify.summarise_timings does: a geomean over only some shapes would mislead."""
    merged = with_baselines(_timed([5.0, 20.0]), _baselines([100.0, 400.0], [4.0, None]))
    assert merged.timings[1].vendor is None
    assert merged.vendor_geomean_us is None
    assert merged.reference_geomean_us == pytest.approx(200.0)


def test_a_verdict_with_baselines_of_its_own_keeps_them_and_empty_baselines_change_nothing():
    own = _timed([5.0, 20.0])
    own.timings[0].vendor, own.vendor_geomean_us = _t(3.0), 6.0
    merged = with_baselines(own, _baselines([100.0, 400.0], [4.0, 16.0]))
    assert merged.timings[0].vendor.median_us == 3.0 and merged.vendor_geomean_us == 6.0
    untouched = with_baselines(_timed([5.0, 20.0]), Verdict(Status.OK, "fp8_gemm", "cuda"))
    assert untouched.vendor_geomean_us is None and "baselines_gpu_window" not in untouched.fingerprint


def test_a_failed_candidate_gets_no_baselines():
    wrong = Verdict(Status.WRONG, "fp8_gemm", "cuda", message="wrong on spec")
    assert with_baselines(wrong, _baselines([100.0, 400.0], [4.0, 16.0])).vendor_geomean_us is None


def test_the_gpu_step_times_the_candidate_alone_when_given_the_generations_baselines(monkeypatch):
    from tasks import evaluation

    asked = []

    def run(setup, source, compiled, phases, race=(), time_baselines=True):
        asked.append((phases, race, time_baselines))
        return _timed([5.0, 20.0])

    monkeypatch.setattr(evaluation, "_run", run)
    setup = EvaluationSetup("fp8_gemm", "cuda", "store")
    race = (("64x64x128", 3.0),)
    merged = evaluation.verify_and_benchmark.fn(setup, None, None, race, _baselines([100.0, 400.0], [4.0, 16.0]))
    alone = evaluation.verify_and_benchmark.fn(setup, None, None)
    # One harness run verifies and then times; rebench (no baselines given) still times them beside the candidate.
    assert asked == [(("verify", "benchmark"), race, False), (("verify", "benchmark"), (), True)]
    assert merged.vendor_geomean_us == pytest.approx(8.0) and alone.vendor_geomean_us is None


def test_the_runs_spares_are_started_with_the_request_its_candidates_take(monkeypatch):
    """The spares a run starts are the ones its candidates' GPU steps take: started with the same request (both
    phases, time_baselines False), or every candidate would start a harness of its own inside its GPU window."""
    from tasks import evaluation

    started = []
    backend = SimpleNamespace(start_spares=lambda problem, options, count: started.append(options))
    monkeypatch.setattr(evaluation, "backend_of", lambda setup: backend)
    evaluation.start_spare_harnesses(EvaluationSetup("fp8_gemm", "cuda", "store"))
    assert [(o.phases, o.time_baselines) for o in started] == [(("verify", "benchmark"), False)]
    setup = EvaluationSetup("fp8_gemm", "cuda", "store")
    assert started[0] == evaluation.run_options(setup, evaluation.CANDIDATE_PHASES, (), False)


def test_the_real_backends_baseline_run_measures_the_baselines_on_the_gpu_it_is_given(monkeypatch):
    from ksci.backends import real

    measured = []

    def measure(problem, options, harness):
        measured.append((options.device, harness.library))
        return _baselines([100.0, 400.0], [4.0, 16.0])

    monkeypatch.setattr(real, "measure_baselines", measure)
    with real.RealBackend("cuda").baseline_runner(load_problem("fp8_gemm"), EvaluationOptions()) as run:
        verdict = run.run("1")
    assert measured == [("1", None)]  # no library: the harness child times the baselines alone
    assert verdict.timings[0].reference.median_us == 100.0


def test_the_simulators_baseline_run_times_nothing_and_leaves_its_candidates_as_recorded():
    from ksci.backends.simulated import SimulatedBackend

    with SimulatedBackend(None).baseline_runner(load_problem("fp8_gemm"), EvaluationOptions()) as run:
        verdict = run.run("0")
    assert verdict.status == Status.OK and verdict.timings == []
    assert verdict.fingerprint["gpu_window"] == {"phases": ["baselines"], "device": "0"}


def test_a_baseline_run_that_fails_says_what_the_child_reported():
    """A reference or vendor call that raises in the harness child: its exception is the failure's line, not an
    empty output tail."""
    from ksci.evaluate.host_stages import measure_baselines
    from ksci.evaluate.options import EnvironmentProblem
    from ksci.evaluate.run.isolate import ChildOutcome

    class Failing:
        def run(self, device):
            message = {"event": "harness_error", "message": "ValueError: shape '[]' is invalid for input of size 2"}
            return ChildOutcome(messages=[message], arrivals=[0.0], sent_after=[0.0], returncode=4)

    with pytest.raises(EnvironmentProblem) as raised:
        measure_baselines(load_problem("fp8_gemm"), EvaluationOptions(), Failing())
    assert "(exit 4): harness_error: ValueError: shape '[]' is invalid" in str(raised.value), str(raised.value)
