"""Time device work with events: L2 flushed before every repetition, inputs rotated, repeat until stable."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 300
    batch: int = 10  # repetitions between synchronisations
    target_spread: float = 0.01  # stop once IQR / median is at most this ...
    budget_s: float = 2.0  # ... or once this much wall time is spent on one (shape, implementation)


class L2Flusher:
    """Overwrites a buffer much larger than the caches, so every repetition starts cold.

    At least 512 MiB: twice MI300X's 256 MB Infinity Cache (which torch does not report), and well over four
    times the L2 of current NVIDIA parts.
    """

    def __init__(self, device: torch.device):
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 * 2**20
        self.buffer = torch.empty(max(4 * l2, 512 * 2**20), dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def time_calls(
    run: Callable[[int], object],
    rotations: int,
    flush: Callable[[], None],
    stream: torch.cuda.Stream,
    policy: TimingPolicy = TimingPolicy(),
    warmup: Callable[[], object] | None = None,
    refresh: Callable[[], None] | None = None,
) -> dict:
    """Median, IQR and min of `run(i)` in microseconds, cycling i over the rotated input sets.

    Only the call itself lies between the two events; the flush is enqueued before the start event.
    `warmup` (default: the timed calls themselves) runs before timing, so the warm-up can use an input set that
    is never timed. `refresh`, when given, rewrites the rotated inputs in place before every batch but the first,
    outside the timed region, and at least two batches run: a kernel that remembers results by pointer then
    leaves a stale output behind, which the check after timing sees.
    The result carries "integrity": host wall-clock and event totals, the flush's own time and the device work
    left running after each batch, which ksci.evaluate checks (see docs/threat-model.md).
    """
    for i in range(policy.warmup):
        warmup() if warmup is not None else run(i % rotations)
    stream.synchronize()
    flush_us = _flush_time_us(flush, stream)
    samples: list[float] = []
    calls, batches, host_s, leftover_us = 0, 0, 0.0, []
    start_time = time.monotonic()
    while len(samples) < policy.max_reps:
        if refresh is not None and batches > 0:
            refresh()
            torch.cuda.synchronize()
        pairs = []
        host_start = time.perf_counter()
        for _ in range(policy.batch):
            flush()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record(stream)
            run(calls % rotations)
            end.record(stream)
            calls += 1
            pairs.append((begin, end))
        end.synchronize()
        host_s += time.perf_counter() - host_start
        leftover_us.append(_leftover_us())
        batches += 1
        samples.extend(b.elapsed_time(e) * 1000.0 for b, e in pairs)
        enough_batches = refresh is None or batches >= 2
        if (
            enough_batches
            and len(samples) >= policy.min_reps
            and (_spread(samples) <= policy.target_spread or time.monotonic() - start_time > policy.budget_s)
        ):
            break
    integrity = {
        "host_us": host_s * 1e6,
        "event_us": sum(samples),
        "flush_us": flush_us,
        "batches": batches,
        "leftover_us": leftover_us,
    }
    return {**summarise(samples), "integrity": integrity}


def _flush_time_us(flush: Callable[[], None], stream: torch.cuda.Stream, reps: int = 5) -> float:
    """The flush's own device time (median of a few), to tell the host's waiting apart from the kernel's."""
    times = []
    for _ in range(reps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record(stream)
        flush()
        end.record(stream)
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def _leftover_us() -> float:
    """How long the device stays busy once the timed stream is done: work the candidate left on other streams."""
    start = time.perf_counter()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def summarise(samples: list[float]) -> dict:
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return {"median_us": median, "iqr_us": q3 - q1, "min_us": min(samples), "reps": len(samples)}


def _spread(samples: list[float]) -> float:
    stats = summarise(samples)
    return stats["iqr_us"] / stats["median_us"] if stats["median_us"] > 0 else 0.0
