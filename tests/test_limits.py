"""ksci.run: the candidate cap and the time limit of an evolution (the flows' use: tests/test_flows.py)."""

from __future__ import annotations

import pytest

from ksci.run import RunLimits


def test_no_limits_never_stop_and_never_trim():
    limits = RunLimits()
    assert limits.stop_reason(7, 10_000, 1e9) is None
    assert limits.children(8, 10_000) == 8


def test_the_cap_trims_the_generation_that_reaches_it_and_stops_the_next():
    limits = RunLimits(max_candidates=20)
    assert limits.children(8, 16) == 4
    assert limits.children(8, 8) == 8
    assert limits.stop_reason(2, 16, 0.0) is None
    assert limits.stop_reason(3, 20, 0.0) == "the run holds 20 candidates (limit 20)"


def test_generation_0_always_runs_and_the_cap_bounds_it_too():
    limits = RunLimits(max_candidates=2, time_limit_s=0.0)
    assert limits.stop_reason(0, 0, 100.0) is None
    assert limits.children(6, 0) == 2


def test_the_time_limit_stops_the_next_generation_once_passed():
    limits = RunLimits(time_limit_s=300.0)
    assert limits.stop_reason(4, 40, 299.0) is None
    assert limits.stop_reason(4, 40, 301.0) == "5.0 min have passed (time limit 5.0 min)"


@pytest.mark.parametrize("bad", [{"max_candidates": 0}, {"time_limit_s": -1.0}])
def test_nonsense_limits_are_refused(bad):
    with pytest.raises(ValueError):
        RunLimits(**bad)
