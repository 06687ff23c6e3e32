"""Racing benchmarks (`ksci evolve --race`, issue 28): a shape's timed calls stop once the candidate is known to lose
it to the run's best, and only then. The rule (ksci.evaluate.harness.timing.raced_out), the harness child's loop
over batches (ksci.evaluate.harness.child.Session.timed_batches, its batches faked: no GPU here), the timing
message the parent accepts, the go-ahead that carries the incumbents, and the evolve flow's glue (the population's
best per shape, only with --race). A simulated evolution with --race runs end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from support.shared_api import with_shared_api

from ksci.evaluate.harness.child import Session
from ksci.evaluate.harness.timing import CallSample, TimedCalls, TimingPolicy, raced_out
from ksci.evaluate.judge.report_schema import validate_message
from ksci.evaluate.judge.timing_rules import summarise
from ksci.proposers.per_shape import best_shape_times

SHAPE = {"m": 64, "n": 64, "k": 128, "seed": 1}
KEY = "64x64x128"


def _calls(center: float, spread: float, n: int) -> list[float]:
    return [center + spread * ((i * 7) % 11 - 5) / 5 for i in range(n)]


def test_a_kernel_clearly_slower_than_the_best_is_raced_out():
    assert raced_out(_calls(20.0, 0.2, 20), 10.0)  # twice as slow, tight times
    assert raced_out(_calls(10.6, 0.05, 20), 10.0)  # 6% slower, known to within far less


@pytest.mark.parametrize(
    ("samples", "incumbent"),
    [
        (_calls(10.2, 0.05, 20), 10.0),  # 2% slower: inside the 3% margin, it may still be timed to win elsewhere
        (_calls(9.0, 0.05, 20), 10.0),  # faster: it may be the new best, timed in full
        (_calls(11.0, 6.0, 20), 10.0),  # 10% slower on the median, but too noisy to know it
        (_calls(20.0, 0.2, 20), None),  # no incumbent on this shape
        ([], 10.0),
    ],
)
def test_a_kernel_that_may_still_win_or_is_not_known_to_lose_is_timed_on(samples, incumbent):
    assert not raced_out(samples, incumbent)


class _FakeBatches:
    """Session.time_batch and check_batch stand-ins: each batch adds `batch` calls of about `us`, every one checked."""

    def __init__(self, us: float) -> None:
        self.us, self.batches = us, 0

    def time_batch(self, shape, timer, batch, calls: TimedCalls) -> list:
        self.batches += 1
        for us in _calls(self.us, 0.02 * self.us, batch):
            calls.add(CallSample(us, 150.0, 10.0, 2.0, 3.0))
        calls.idle.append(CallSample(0.0, 150.0, 10.0, 2.0, 3.0))
        return [None] * batch

    def check_batch(self, cases, calls: TimedCalls) -> bool:
        calls.checked += 3
        return True


def _session(race: dict, us: float) -> tuple[Session, _FakeBatches]:
    session = Session.__new__(Session)  # no GPU: the loop alone, its batches faked
    session.request, session.policy = {"race": race}, TimingPolicy(target_precision=1e-9, budget_s=30.0)
    fake = _FakeBatches(us)
    session.time_batch, session.check_batch = fake.time_batch, fake.check_batch
    return session, fake


def test_the_childs_timed_calls_stop_after_two_batches_on_a_lost_shape_and_say_so():
    session, fake = _session({KEY: 10.0}, us=20.0)
    calls = session.timed_batches(SHAPE, timer=None, batch=10)
    assert fake.batches == 2 and len(calls.kernel_us) == 20 and calls.raced_against_us == 10.0
    idle = CallSample(0.0, 150.0, 10.0, 2.0, 3.0)
    message = {
        "event": "timing", "shape": SHAPE, "key": KEY, "flops": 1.0, "bytes": 1.0,
        "kernel": summarise(calls.kernel_us), "integrity": {**calls.integrity(idle), "shape_host_us": 5e4},
    }  # fmt: skip
    validate_message(message)  # the parent accepts the message that says it was raced
    assert message["integrity"]["raced_against_us"] == 10.0


@pytest.mark.parametrize(("race", "us"), [({KEY: 10.0}, 9.0), ({}, 20.0), ({"128x64x128": 1.0}, 20.0)])
def test_a_shape_it_may_win_or_without_an_incumbent_is_timed_to_the_policys_end(race, us):
    session, fake = _session(race, us)
    calls = session.timed_batches(SHAPE, timer=None, batch=10)
    assert len(calls.kernel_us) == TimingPolicy().max_reps and calls.raced_against_us is None
    assert "raced_against_us" not in calls.integrity(CallSample(0.0, 150.0, 10.0, 2.0, 3.0))


def test_the_incumbents_are_the_best_ok_median_per_shape():
    rows = pd.DataFrame(
        [
            {"status": "ok", "shape_times_json": json.dumps({"a": 10.0, "b": 30.0})},
            {"status": "ok", "shape_times_json": json.dumps({"a": 12.0, "b": 25.0, "c": 5.0})},
            {"status": "wrong", "shape_times_json": json.dumps({"a": 1.0})},  # a failure never sets the bar
            {"status": "ok", "shape_times_json": None},
        ]
    )
    assert best_shape_times(rows) == (("a", 10.0), ("b", 25.0), ("c", 5.0))
    assert best_shape_times(pd.DataFrame()) == ()


def test_the_go_ahead_carries_the_incumbents_and_only_with_race(monkeypatch):
    from ksci.evaluate.options import EvaluationOptions
    from ksci.evaluate.run import harness_process
    from ksci.problem.spec import load_problem

    sent = []
    started = SimpleNamespace(child=SimpleNamespace(run=lambda timeout, go, lease: sent.append(go)))
    for race in ((("64x64x128", 10.0),), ()):
        options = EvaluationOptions(phases=("benchmark",), race=race)
        harness = harness_process.Harness(load_problem("fp8_gemm"), None, options)
        harness._started = started
        harness.run(None)
        assert "race" not in harness_process.harness_request(load_problem("fp8_gemm"), options)  # spares unchanged
    assert sent == [{"race": {"64x64x128": 10.0}}, {}]


@pytest.mark.parametrize("race", [True, False])
def test_the_flow_races_each_candidate_against_its_population_only_with_race(monkeypatch, race):
    from ksci.run import RunSpec
    from tasks import steps

    submitted, its_baselines = [], object()

    def submit_candidate(setup, source, meta, race=(), baselines=None):
        submitted.append((race, baselines))
        return SimpleNamespace(recorded=SimpleNamespace(add_done_callback=lambda f: None))

    monkeypatch.setattr(steps, "submit_candidate", submit_candidate)
    monkeypatch.setattr(steps, "generation_baselines", SimpleNamespace(submit=lambda *args: its_baselines))
    population = pd.DataFrame([{"status": "ok", "shape_times_json": json.dumps({KEY: 10.0})}])
    spec = RunSpec(problem="fp8_gemm", run="r", simulate="", race=race)
    steps.generation_steps(spec, 1, None, population).submit("source", SimpleNamespace(generation=1))
    assert submitted == [(((KEY, 10.0),) if race else (), its_baselines)]


def test_a_simulated_evolution_with_race_runs_to_its_end(tmp_path, shared_prefect_api):
    done = subprocess.run(
        [sys.executable, "-m", "ksci.cli", "evolve", "--problem", "fp8_gemm", "--generations", "2", "--children", "3",
         "--simulate", "--race", "--no-profile", "--quiet", "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent.parent,
        env=with_shared_api(dict(os.environ), shared_prefect_api),  # the run is what is checked, not its API
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "simulated" in done.stdout.lower()
