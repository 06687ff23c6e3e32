"""The timing-distribution and clock rules of ksci/evaluate/protocol.py on call times recorded on an H100.

tests/data/timing_samples.json holds every timed call of honest kernels (fp8_gemm's mma and naive seeds on 18
shapes, rmsnorm's naive and vectorized seeds on 9), recorded with benchmarks/timing_samples.py. No honest shape
may be doubted; the same recorded calls, rearranged as a cheat would make them, must be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ksci.evaluate.protocol import distribution_doubts, summarise, timing_doubts

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
