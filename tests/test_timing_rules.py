"""The timing-distribution and clock rules of ksci/evaluate/judge/timing_rules.py on call times recorded on an H100.

tests/data/timing_samples.json holds every timed call of honest kernels (fp8_gemm's mma and naive seeds on 18
shapes, rmsnorm's naive and vectorized seeds on 9), recorded with benchmarks/timing_samples.py. No honest shape
may be doubted; the same recorded calls, rearranged as a cheat would make them, must be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ksci.evaluate.judge.timing_rules import distribution_doubts, summarise, timing_doubts

RECORDED = json.loads((Path(__file__).parent / "data" / "timing_samples.json").read_text())["shapes"]
IDS = [f"{s['kernel']} {s['shape']}" for s in RECORDED]


def _message(shape: dict, samples: list[float] | None = None) -> dict:
    samples = samples or shape["samples_us"]
    integrity = {
        "calls": len(samples),
        "checked": min(len(samples), 8),
        "flush_us": 170.0,
        "gap_us": shape["gap_us"],
        "gap_idle_us": shape["gap_idle_us"],
        "tail_us": shape["tail_us"],
        "tail_idle_us": shape["tail_idle_us"],
        # Not recorded then: the device's tail stands in for the host's synchronisation too (the stricter case).
        "sync_us": shape["tail_us"],
        "sync_idle_us": shape["tail_idle_us"],
        "samples_us": samples,
        "shape_host_us": 1e5,
    }
    return {"kernel": summarise(samples), "integrity": integrity}


@pytest.mark.parametrize("shape", RECORDED, ids=IDS)
def test_no_recorded_honest_shape_is_doubted(shape):
    assert timing_doubts(_message(shape)) == []


def _by(kernel: str, key: str) -> dict:
    return next(s for s in RECORDED if s["kernel"] == kernel and s["shape"] == key)


def test_calls_that_ride_on_a_slow_one_make_two_groups():
    """A replaying kernel: one call in four does the work (mma's recorded calls), the others are fast
    (rmsnorm's recorded calls on a small shape), each fast call right after a slow one or another fast one."""
    slow = _by("fp8_gemm seed:mma", "1024x1536x7168")["samples_us"]
    fast = _by("rmsnorm seed:vectorized", "4096x2048")["samples_us"]
    mixed = [slow[i] if i % 4 == 0 else fast[i] for i in range(len(slow))]
    groups = [d for d in distribution_doubts(mixed) if "two groups" in d]
    assert len(groups) == 1 and "15 calls around 18" in groups[0] and "5 of the fast ones right after" in groups[0]
    assert any("two groups" in d for d in timing_doubts(_message(_by("fp8_gemm seed:mma", "1024x1536x7168"), mixed)))


def test_a_spread_wider_than_the_median_is_doubted_without_two_groups():
    """Calls spread evenly over a decade (recorded calls scaled): no gap between neighbours, but no honest kernel
    with a cold cache and fresh inputs varies so."""
    base = _by("fp8_gemm seed:mma", "1024x7168x2048")["samples_us"]
    spread = [t * 10 ** (i / (len(base) - 1)) for i, t in enumerate(sorted(base))]
    doubts = distribution_doubts(spread)
    assert len(doubts) == 1 and "interquartile range" in doubts[0]


def test_a_minority_of_slow_calls_is_not_a_group():
    """Seen on an H100 from an honest kernel: 10 of 70 calls about 3x slower than the rest (a cheat that profits
    in the median must make more than half its calls fast, so a slow minority is no sign of one)."""
    samples = list(_by("fp8_gemm seed:mma", "1024x4096x512")["samples_us"])[:70]
    samples = [t * 2.9 if i % 7 == 3 else t for i, t in enumerate(samples)]
    assert distribution_doubts(samples) == []


def test_a_single_slow_outlier_is_not_a_group():
    samples = list(_by("fp8_gemm seed:mma", "6144x4608x7168")["samples_us"])
    samples[7] *= 3  # one call held up (a clock hiccup): under 10% of the calls
    assert distribution_doubts(samples) == []


def _integrity_of(gaps: list[float], idle_gap: float = 9.0) -> dict:
    from ksci.evaluate.harness.timing import CallSample, TimedCalls

    calls = TimedCalls()
    for gap in gaps:
        calls.add(CallSample(kernel_us=50.0, flush_us=17.0, gap_us=gap, tail_us=5.0, sync_us=4.0))
    calls.checked = len(gaps)
    idle = CallSample(0.0, 17.0, idle_gap, 5.0, 4.0)
    return calls.integrity(idle)


def test_host_delays_on_most_calls_do_not_make_an_honest_kernel_suspicious():
    """Measured on 2 x H200 with both GPUs evaluating and 8 spinning processes: honest kernels' host gaps were
    90-2100 us beyond their events on most calls. Delays only ever add to a gap, so the low end of the calls is
    judged; here 80 of 100 calls are late by 270-2100 us and the gap rule stays quiet."""
    gaps = [10.0 + (270.0 + 20 * (i % 90) if i % 5 else 0.0) for i in range(100)]
    integrity = _integrity_of(gaps)
    assert integrity["gap_us"] == pytest.approx(10.0)
    message = {"kernel": summarise([50.0 + 0.1 * (i % 7) for i in range(100)]), "integrity": integrity}
    assert not [d for d in timing_doubts(message) if "host clock" in d]


def test_host_work_outside_the_timed_region_on_every_call_is_still_doubted():
    """A timer that under-reports by 200 us (or 200 us of host work around the timed call) adds to every call's
    gap: its low end is 200 us above the idle call's, and the rule names it, with or without host delays on top."""
    gaps = [210.0 + (300.0 if i % 3 else 0.0) for i in range(100)]
    integrity = _integrity_of(gaps)
    message = {"kernel": summarise([50.0 + 0.1 * (i % 7) for i in range(100)]), "integrity": integrity}
    assert [d for d in timing_doubts(message) if "host clock" in d]


def test_the_idle_host_is_measured_before_a_shape_and_among_its_calls():
    """The before-calibration and the idle calls drawn among the timed ones (child.py): the slower of each latency,
    the idle calls summarised as the timed ones are (the gap's tenth percentile: a late wake-up adds nothing)."""
    from ksci.evaluate.harness.timing import CallSample, idle_summary, slower_idle

    calm, loaded = CallSample(0.0, 17.0, 9.0, 5.0, 4.0), CallSample(0.0, 18.0, 220.0, 6.0, 30.0)
    assert slower_idle(calm, loaded) == CallSample(0.0, 18.0, 220.0, 6.0, 30.0)
    assert slower_idle(loaded, calm) == slower_idle(calm, loaded)
    among = [CallSample(0.0, 17.0, 200.0 + (900.0 if i % 4 == 0 else i), 5.0, 20.0) for i in range(20)]
    summary = idle_summary(among)
    assert summary.gap_us == pytest.approx(203.0)  # sorted gaps: 201, 202, 203, ...; the tenth percentile is the 3rd
    assert slower_idle(calm, summary).gap_us == summary.gap_us


def test_the_flush_overwrites_four_times_the_last_level_cache():
    """On NVIDIA four times the L2 torch reports (an H100's 50 MiB: 200 MiB); on ROCm, whose Infinity Cache torch
    does not report, never less than 512 MiB (twice MI300X's 256 MB); an unreported L2 gets that floor too."""
    from ksci.evaluate.harness.timing import ROCM_FLUSH_FLOOR, flush_bytes

    h100_l2, mi300x_l2 = 50 * 2**20, 4 * 2**20
    assert flush_bytes(h100_l2, rocm=False) == 200 * 2**20
    assert flush_bytes(mi300x_l2, rocm=True) == ROCM_FLUSH_FLOOR == 512 * 2**20
    assert flush_bytes(0, rocm=False) == ROCM_FLUSH_FLOOR
    assert flush_bytes(256 * 2**20, rocm=True) == 1024 * 2**20  # a larger cache than the floor: four times it
