"""The run loop (ksci.schedule) as plain Python: when each generation starts, with how many children, and when the
run stops, with a launcher that records what it was asked instead of running generations (no Prefect)."""

from __future__ import annotations

import pytest

from ksci.run import RunLimits, RunSpec
from ksci.schedule import Hooks, ready, run_generations


class Recorder:
    """A launcher and the loop's hooks, writing one event list: ("start", g, children), ("wait", g),
    ("finished", g), ("stopped", message)."""

    def __init__(self, fail: int | None = None) -> None:
        self.events: list[tuple] = []
        self.fail = fail

    def launch(self, work: RunSpec, generation: int):
        self.events.append(("start", generation, work.children))

        def wait() -> dict:
            self.events.append(("wait", generation))
            if generation == self.fail:
                raise RuntimeError(f"generation {generation} failed")
            return {"generation": generation, "rows": []}

        return wait

    def hooks(self) -> Hooks:
        return Hooks(
            started=lambda g, children: None,
            finished=lambda summary: self.events.append(("finished", summary["generation"])),
            stopped=lambda message: self.events.append(("stopped", message)),
        )

    def of(self, kind: str) -> list:
        return [event[1] for event in self.events if event[0] == kind]


def spec(tmp_path, **fields) -> RunSpec:
    return RunSpec(problem="fp8_gemm", run="r", simulate="", store_root=str(tmp_path), **fields)


def test_without_overlap_each_generation_starts_after_the_one_before_has_finished(tmp_path):
    recorder = Recorder()
    run_generations(spec(tmp_path, generations=3, children=4), recorder.launch, recorder.hooks())
    assert recorder.events == [
        ("start", 0, 4),
        ("wait", 0),
        ("finished", 0),
        ("start", 1, 4),
        ("wait", 1),
        ("finished", 1),
        ("start", 2, 4),
        ("wait", 2),
        ("finished", 2),
    ]


def test_a_launcher_that_runs_the_generation_itself_gives_its_summary_as_it_is(tmp_path):
    finished = []
    hooks = Hooks(started=lambda g, c: None, finished=finished.append, stopped=lambda m: None)
    run_generations(spec(tmp_path, generations=2), lambda work, g: ready({"generation": g}), hooks)
    assert finished == [{"generation": 0}, {"generation": 1}]


def test_with_overlap_1_generation_g_starts_once_g_minus_2_has_finished(tmp_path):
    recorder = Recorder()
    run_generations(spec(tmp_path, generations=4, overlap=1), recorder.launch, recorder.hooks())
    events = recorder.events
    assert recorder.of("start") == [0, 1, 2, 3]
    assert recorder.of("finished") == [0, 1, 2, 3]  # in generation order
    assert events.index(("start", 1, 6)) < events.index(("wait", 0))  # 1 overlaps 0
    assert events.index(("finished", 0)) < events.index(("start", 2, 6))  # 2 learns from 0
    assert events.index(("start", 2, 6)) < events.index(("wait", 1))  # and overlaps 1


def test_the_candidate_cap_counts_running_generations_by_their_children(tmp_path):
    recorder = Recorder()
    limits = RunLimits(max_candidates=10)
    run_generations(
        spec(tmp_path, generations=5, children=4, overlap=3, limits=limits), recorder.launch, recorder.hooks()
    )
    starts = [event for event in recorder.events if event[0] == "start"]
    assert starts == [("start", 0, 4), ("start", 1, 4), ("start", 2, 2)]  # 4 + 4 + 2 = the cap
    assert recorder.of("finished") == [0, 1, 2]
    stopped = recorder.of("stopped")
    assert len(stopped) == 1 and "before generation 3" in stopped[0] and "limit 10" in stopped[0]


@pytest.mark.parametrize("overlap", [0, 1])
def test_the_proposer_is_asked_before_every_generation_but_the_first_with_or_without_overlap(tmp_path, overlap):
    recorder = Recorder()
    asked = []

    def proposer_stop(work: RunSpec) -> str | None:
        asked.append(len(recorder.of("start")))
        return "the LLM budget is spent" if len(asked) == 3 else None

    run_generations(spec(tmp_path, generations=5, overlap=overlap), recorder.launch, recorder.hooks(), proposer_stop)
    assert asked == [0, 1, 2]
    assert recorder.of("start") == [0, 1]
    assert recorder.of("finished") == [0, 1]  # a running generation still finishes after the stop
    assert recorder.of("stopped") == ["evolution r stops before generation 2: the LLM budget is spent"]


def test_the_time_limit_is_read_on_the_loop_s_clock(tmp_path):
    recorder = Recorder()
    now = iter([0.0, 10.0, 50.0, 70.0])
    limits = RunLimits(time_limit_s=60.0)
    run_generations(
        spec(tmp_path, generations=5, limits=limits), recorder.launch, recorder.hooks(), clock=lambda: next(now)
    )
    assert recorder.of("start") == [0, 1]  # generation 0 always runs; 1 at 50 s; 2 not at 70 s
    assert "1.2 min have passed" in recorder.of("stopped")[0]


def test_a_failed_generation_ends_the_loop_when_it_is_waited_for(tmp_path):
    recorder = Recorder(fail=1)
    with pytest.raises(RuntimeError, match="generation 1 failed"):
        run_generations(spec(tmp_path, generations=4, overlap=1), recorder.launch, recorder.hooks())
    assert recorder.of("start") == [0, 1, 2]  # 2 had started beside 1 before 1 was waited for
    assert recorder.of("finished") == [0]
