"""Time device work with events: L2 flushed before every repetition, repeated until stable.

Baselines are timed in batches over rotated input sets (time_calls); candidates one call at a time (CallTimer),
each call on an input set of its own (ksci/evaluate/harness/child.py), what they measured gathered per shape
(TimedCalls).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ksci.evaluate.judge.timing_rules import summarise

SAMPLES_KEPT = (
    1000  # call times sent with a shape's timing, in call order (ksci/evaluate/judge/timing_rules.py judges them)
)


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 300
    batch: int = 10  # repetitions between synchronisations
    # Stop once the median is known to within this fraction (the half-width of its 95% interval, 1.57 IQR / sqrt(n),
    # McGill, Tukey & Larsen's notch): with 10 calls that is an IQR of 1% of the median, with 90 of 3% ...
    target_precision: float = 0.005
    budget_s: float = 2.0  # ... or once this much wall time is spent on one (shape, implementation)


class L2Flusher:
    """Overwrites a buffer much larger than the caches, so every repetition starts cold (flush_bytes)."""

    def __init__(self, device: torch.device):
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        self.buffer = torch.empty(flush_bytes(l2, torch.version.hip is not None), dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()

    def nudge(self) -> None:
        """One launch of a kernel that does almost nothing (four bytes zeroed): an idle call's stand-in for the
        candidate's launch, so that the host's cost of a launch is measured in the idle calls too."""
        self.buffer[:4].zero_()


ROCM_FLUSH_FLOOR = 512 * 2**20  # twice MI300X's 256 MB Infinity Cache, which torch does not report


def flush_bytes(l2_bytes: int, rocm: bool) -> int:
    """How much the flush overwrites: four times the last-level cache, so that nothing a call left there survives.

    On NVIDIA that is four times the L2 torch reports (H100 and H200: 50 MiB, so 200 MiB). On ROCm the last level
    is MI300X's Infinity Cache, which torch does not report: at least ROCM_FLUSH_FLOOR. An L2 that is not reported
    gets the floor too. Each timed call and each idle call flushes, so the size is paid thousands of times per
    candidate (issue 28: on an H100 the flushes of 512 MiB took about four times the device time of the
    candidate's own timed calls in a benchmark run).
    """
    if rocm or l2_bytes <= 0:
        return max(4 * l2_bytes, ROCM_FLUSH_FLOOR)
    return 4 * l2_bytes


def time_calls(
    run: Callable[[int], object],
    rotations: int,
    flush: Callable[[], None],
    stream: torch.cuda.Stream,
    policy: TimingPolicy = TimingPolicy(),
) -> dict:
    """Median, IQR and min of `run(i)` in microseconds, cycling i over the rotated input sets.

    For the baselines (the reference and the vendor library), which are trusted: only the call itself lies between
    the two events; the flush is enqueued before the start event; a batch of calls is synchronised at once.
    Candidates are timed one call at a time by CallTimer instead (see Session.benchmark_shape in child.py).
    """
    for i in range(policy.warmup):
        run(i % rotations)
    stream.synchronize()
    samples: list[float] = []
    calls = 0
    start_time = time.monotonic()
    while len(samples) < policy.max_reps:
        pairs = []
        for _ in range(policy.batch):
            flush()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record(stream)
            run(calls % rotations)
            end.record(stream)
            calls += 1
            pairs.append((begin, end))
        end.synchronize()
        samples.extend(b.elapsed_time(e) * 1000.0 for b, e in pairs)
        if len(samples) >= policy.min_reps and (
            precise(samples, policy.target_precision) or time.monotonic() - start_time > policy.budget_s
        ):
            break
    return summarise(samples)


@dataclass(frozen=True)
class CallSample:
    """One timed call, in microseconds: its events, the flush before it, the host's clock and the device's tail."""

    kernel_us: float  # begin -> end event: the call itself
    flush_us: float  # flush-begin -> begin event
    gap_us: float  # host clock from before the flush was enqueued to the end event's completion, less both above
    tail_us: float  # end event -> an event recorded once every stream of the device was idle
    sync_us: float  # host clock: how long the device-wide synchronisation after the end event took


class CallTimer:
    """Times one call at a time, so that no call can hide work under the next one's flush.

    Per call: the L2 flush and three events on the timed stream (flush-begin, begin, end), the host clock around
    them, then a device-wide synchronisation and a fourth event recorded after it. Differences tell work the events
    did not see: `gap_us`, host time the events do not account for (a timer that reports less than the call took),
    and how long the device stayed busy after the end event (work on a stream of the candidate's own, however it
    was made), measured twice: `tail_us` on the device's clock (it also holds the host's wake-up after a long wait,
    which varies by tens of microseconds) and `sync_us`, the synchronisation's own duration on the host's clock
    (short when nothing runs; it misses only work that ends while the host wakes up). Work still running shows in
    both. All contain the host's own latency, so they are judged against the same numbers for a call that does
    nothing but launch a near-empty kernel (`idle`, `calibrate`), measured in the same way on the same device, before
    a shape's calls and between them at places drawn at random (ksci/evaluate/harness/child.py), so that they see
    the host as the calls saw it (ksci/evaluate/judge/timing_rules.py judges the difference).
    """

    def __init__(
        self, flush: Callable[[], None], stream: torch.cuda.Stream, idle_run: Callable[[], object] = lambda: None
    ):
        self.flush, self.stream, self.idle_run = flush, stream, idle_run

    def __call__(self, run: Callable[[], object]) -> CallSample:
        stream = self.stream
        flush_begin, begin, end, idle = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        host_start = time.perf_counter()
        flush_begin.record(stream)
        self.flush()
        begin.record(stream)
        run()
        end.record(stream)
        host_end = wait_by_polling(end)
        torch.cuda.synchronize()  # every stream of the device, whoever made it
        sync_us = (time.perf_counter() - host_end) * 1e6
        idle.record(stream)
        idle.synchronize()
        kernel_us = begin.elapsed_time(end) * 1000.0
        flush_us = flush_begin.elapsed_time(begin) * 1000.0
        gap_us = (host_end - host_start) * 1e6 - flush_us - kernel_us
        return CallSample(kernel_us, flush_us, gap_us, end.elapsed_time(idle) * 1000.0, sync_us)

    def idle(self) -> CallSample:
        """One idle call: the flush and the events as for a timed call, and `idle_run` (a near-empty launch) in
        place of the candidate."""
        return self(self.idle_run)

    def calibrate(self, reps: int = 10) -> CallSample:
        """The host's and the device's own latency over `reps` idle calls in a row (idle_summary)."""
        return idle_summary([self.idle() for _ in range(reps)])


def idle_summary(samples: list[CallSample]) -> CallSample:
    """Idle calls' gap (its tenth percentile, as for the timed calls), tail and sync (medians)."""
    return CallSample(
        0.0,
        statistics.median(s.flush_us for s in samples),
        low_quantile([s.gap_us for s in samples]),
        statistics.median(s.tail_us for s in samples),
        statistics.median(s.sync_us for s in samples),
    )


@dataclass
class TimedCalls:
    """What one shape's timed calls measured, in call order: CallTimer's parts of each call, and the checks."""

    kernel_us: list[float] = field(default_factory=list)
    gap_us: list[float] = field(default_factory=list)
    tail_us: list[float] = field(default_factory=list)
    sync_us: list[float] = field(default_factory=list)
    flush_us: list[float] = field(default_factory=list)
    idle: list[CallSample] = field(default_factory=list)  # the idle calls made between the timed ones
    checked: int = 0
    batches: int = 0
    raced_against_us: float | None = None  # the incumbent's median, when the calls stopped on raced_out

    def add(self, call: CallSample) -> None:
        self.kernel_us.append(call.kernel_us)
        self.gap_us.append(call.gap_us)
        self.tail_us.append(call.tail_us)
        self.sync_us.append(call.sync_us)
        self.flush_us.append(call.flush_us)

    def integrity(self, idle: CallSample) -> dict:
        """The timing message's integrity facts beside the idle device's (ksci/evaluate/judge/timing_rules.py): medians, but
        the gap's tenth percentile (low_quantile)."""
        return {
            "calls": len(self.kernel_us),
            "checked": self.checked,
            "flush_us": statistics.median(self.flush_us),
            "gap_us": low_quantile(self.gap_us),
            "gap_idle_us": idle.gap_us,
            "tail_us": statistics.median(self.tail_us),
            "tail_idle_us": idle.tail_us,
            "sync_us": statistics.median(self.sync_us),
            "sync_idle_us": idle.sync_us,
            "samples_us": [round(x, 3) for x in self.kernel_us[:SAMPLES_KEPT]],
            **({"raced_against_us": self.raced_against_us} if self.raced_against_us is not None else {}),
        }


def slower_idle(*measured: CallSample) -> CallSample:
    """The idle device's latencies measured more than once for a shape (before its timed calls, and between them),
    the larger of each.

    A host's load changes during a shape's timing (another GPU's evaluation starts, a compiler runs): the calls are
    judged against the host as it was among them, not only before them. A cheat's hidden work is in the calls and
    never in an idle call, and the idle calls between the timed ones sit at places drawn at random after the
    candidate was loaded, so this gives it nothing.
    """
    return CallSample(
        0.0,
        max(m.flush_us for m in measured),
        max(m.gap_us for m in measured),
        max(m.tail_us for m in measured),
        max(m.sync_us for m in measured),
    )


def wait_by_polling(event: torch.cuda.Event) -> float:
    """Wait for `event` by asking for it in a loop, and return the host's clock when it was seen complete.

    `event.synchronize()` lets the CUDA driver choose how to wait, and on a loaded host it may yield or block and
    wake the thread a few hundred microseconds late: on two H200s with both GPUs evaluating and eight spinning
    processes, honest kernels showed a host gap of 90-2100 us beyond their events (and an idle call 270 us),
    which the gap rule read as work outside the timed region. Polling sees completion within a microsecond or
    two whenever the thread runs at all.
    """
    while not event.query():
        pass
    return time.perf_counter()


def low_quantile(values: list[float]) -> float:
    """The tenth percentile (the least value below ten): the host's own delays only ever add to a call's gap.

    A preempted or late-woken host thread makes some calls' gaps longer, never shorter, so the low end of the
    distribution is what the calls themselves took. A timer that under-reports, or host work outside the timed
    region, adds to every call's gap and still shows there.
    """
    ordered = sorted(values)
    return ordered[len(ordered) // 10] if ordered else 0.0


def raced_out(samples: list[float], incumbent_us: float | None, margin: float = 0.03) -> bool:
    """Whether the calls so far show, at 95%, a median more than `margin` above `incumbent_us` (the best median any
    kernel of the run has had on this shape): this kernel cannot win the shape, and more calls would only pin down
    by how much it loses. None: no incumbent, never raced out.

    The interval is the one `precise` stops on (McGill, Tukey & Larsen's notch). The margin covers what separates two
    harness processes timing the same kernel on the same GPU (about 1%, docs/results.md's repeatability runs).
    """
    if incumbent_us is None or incumbent_us <= 0 or not samples:
        return False
    median, half_width = median_interval(samples)
    return median - half_width > incumbent_us * (1.0 + margin)


def precise(samples: list[float], target: float) -> bool:
    """Whether the median of `samples` is known to within `target` of itself (95% interval of the median)."""
    median, half_width = median_interval(samples)
    return median > 0 and half_width <= target * median


def median_interval(samples: list[float]) -> tuple[float, float]:
    """The median of `samples` and the half-width of its 95% interval, 1.57 IQR / sqrt(n) (McGill, Tukey & Larsen's
    notch): what `precise` stops on and `raced_out` races with."""
    stats = summarise(samples)
    return stats["median_us"], 1.57 * stats["iqr_us"] / math.sqrt(len(samples))
