"""The timing-integrity rules: when a kernel's timing cannot be trusted, and the verdict is `suspicious`.

The child's messages have passed their schema (report_schema.py); what they report is then held against itself and
against what the child cannot touch: each timed call's host time against its events (`gap`), the device's busy time
after its end event (`tail`), the checked outputs against the timed calls, the call times' distribution, the child's
clock over each shape against the parent's (ParentClock, from the report pipe's sending times), the child's shapes
against how long it ran, and each shape's time against the speed of light (docs/threat-model.md).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ksci.problem.spec import shape_key

if TYPE_CHECKING:
    from ksci.evaluate.results import ShapeTiming
    from ksci.evaluate.run.isolate import ChildOutcome

CLOCK_TOLERANCE = 1.02
# A timed call's host time that its events do not account for (`gap`), and the time the device stayed busy after its
# end event (`tail`), are judged against the same numbers for a call that does nothing, measured just before: an
# excess over this floor, or over this fraction of the median call, is work the events did not see (a timer that
# reports less than the call took, or work on another stream). A 2x lie on the timer is an excess of the median.
GAP_FLOOR_US = 30.0
GAP_FRACTION = 0.25
TAIL_FLOOR_US = 60.0
TAIL_FRACTION = 0.25
# The child's clock over one shape against the parent's: the time between the shape's two report messages on the
# parent's clock, which the child's code cannot touch, as an interval (ParentClock): each message was written after
# the parent last saw the pipe empty and before it read it (ksci/evaluate/run/report_pipe.py). The slack covers the
# child's own work between its clock readings and its writes (encoding the timing message), milliseconds at most.
PARENT_CLOCK_SLACK_US = 20000.0
PAUSE_SHOWN_US = 50000.0  # a parent's interval wider than this is named a pause in the doubt's words
# Full checks of timed outputs: at least this many per shape (every one where fewer calls were timed).
CHECKED_LEAST = 6
# Timing distributions an honest kernel does not produce (distribution_doubts).
IQR_OVER_MEDIAN = 1.0
GROUP_RATIO = 1.5  # two groups of call times at least this far apart ...
GROUP_SHARE = 0.25  # ... each holding at least this share of the calls (and 3 of them)


@dataclass(frozen=True)
class ParentClock:
    """How long the parent's clock says a shape took: at least `least_us` (the `timing` message's earliest sending
    time after the `shape` message's latest), at most `most_us` (the other way round). One number where the parent
    kept up with the pipe; an interval as wide as any pause of the parent's in between (a loaded host, a busy
    interpreter), so that a pause is never taken for the child's clock lying."""

    least_us: float
    most_us: float

    def text(self) -> str:
        width = self.most_us - self.least_us
        if width < 1000.0:
            return f"{self.least_us / 1e3:.1f} ms"
        behind = " (the parent fell behind reading the pipe)" if width > PAUSE_SHOWN_US else ""
        return f"{self.least_us / 1e3:.1f} to {self.most_us / 1e3:.1f} ms{behind}"


def clock_doubt(child_us: float, parent: ParentClock | float) -> str | None:
    """Why the child's clock over a shape disagrees with the parent's, or None: it must lie within the parent's
    interval, give or take CLOCK_TOLERANCE and PARENT_CLOCK_SLACK_US. A child whose clock ran slow (a patched
    timer, so that host time looks shorter than it was) falls below the least; one whose clock ran fast, above the
    most."""
    parent = parent if isinstance(parent, ParentClock) else ParentClock(parent, parent)

    def slack(other_us: float) -> float:
        return (CLOCK_TOLERANCE - 1) * max(child_us, other_us) + PARENT_CLOCK_SLACK_US

    if child_us + slack(parent.least_us) < parent.least_us or child_us - slack(parent.most_us) > parent.most_us:
        return f"the child's clock says the shape took {child_us / 1e3:.1f} ms, the parent's {parent.text()}"
    return None


def timing_doubts(message: dict, parent_us: ParentClock | float | None = None) -> list[str]:
    """Why the kernel's timing on one shape cannot be trusted (empty when it can).

    `parent_us`: the parent's own clock between the shape's `shape` and `timing` messages, where it saw both.
    """
    integrity, kernel = message["integrity"], message["kernel"]
    median = kernel["median_us"]
    doubts = []
    if kernel["min_us"] <= 0 or not (kernel["min_us"] <= median) or kernel["reps"] < 1:
        doubts.append(f"implausible statistics (min {kernel['min_us']:.3g} us, median {median:.3g} us)")
    gap = integrity["gap_us"] - integrity["gap_idle_us"]
    if gap > max(GAP_FLOOR_US, GAP_FRACTION * median):
        doubts.append(
            f"the host clock saw each call take {gap:.1f} us more than its events show (median call {median:.2f} us;"
            f" {integrity['gap_idle_us']:.1f} us of host latency already deducted): a timer that reports less than"
            " the call took, or work outside the timed region"
        )
    # Work left running shows on both clocks; host wake-up noise shows on the device's alone.
    tail = min(integrity["tail_us"] - integrity["tail_idle_us"], integrity["sync_us"] - integrity["sync_idle_us"])
    if tail > max(TAIL_FLOOR_US, TAIL_FRACTION * median):
        doubts.append(
            f"the device stayed busy {tail:.1f} us after each call's end event (median, beyond a call that does"
            f" nothing; median call {median:.2f} us): work on a stream of the kernel's own"
        )
    calls, checked = integrity["calls"], integrity["checked"]
    if calls < kernel["reps"] or checked < min(calls, CHECKED_LEAST):
        doubts.append(f"only {checked} of {calls} timed outputs were checked ({kernel['reps']} timed calls)")
    if parent_us is not None and (doubt := clock_doubt(integrity["shape_host_us"], parent_us)) is not None:
        doubts.append(doubt)
    doubts.extend(distribution_doubts(integrity["samples_us"], kernel))
    return doubts


def distribution_doubts(samples: list[float], kernel: dict | None = None) -> list[str]:
    """Call times an honest kernel does not produce: a spread larger than the median, or two groups of calls.

    Every timed call gets new inputs, a poisoned output and a cold L2, so an honest kernel's times form one group.
    A kernel that skips work on some calls (replayed results, calls that ride on an earlier one's work) shows a
    fast group beside a slow one, the fast calls coming right after slow ones.
    """
    if len(samples) < 4:
        return []
    kernel = kernel or summarise(samples)
    doubts = []
    if kernel["iqr_us"] > IQR_OVER_MEDIAN * kernel["median_us"]:
        doubts.append(
            f"the call times' interquartile range ({kernel['iqr_us']:.1f} us) exceeds their median "
            f"({kernel['median_us']:.1f} us)"
        )
    ordered = sorted(samples)
    least = max(3, math.ceil(GROUP_SHARE * len(ordered)))
    cuts = [i for i in range(least, len(ordered) - least + 1) if ordered[i] > GROUP_RATIO * ordered[i - 1] > 0]
    if cuts:
        cut = ordered[cuts[0]]
        fast = [i for i, t in enumerate(samples) if t < cut]
        after_slow = sum(1 for i in fast if i > 0 and samples[i - 1] >= cut)
        doubts.append(
            f"the call times fall into two groups: {len(fast)} calls around {statistics.median(ordered[: cuts[0]]):.1f}"
            f" us and {len(samples) - len(fast)} around {statistics.median(ordered[cuts[0] :]):.1f} us"
            f" ({after_slow} of the fast ones right after a slow one): calls that profit from other calls"
        )
    return doubts


def summarise(samples: list[float]) -> dict:
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return {"median_us": median, "iqr_us": q3 - q1, "min_us": min(samples), "reps": len(samples)}


def outcome_timing_doubts(outcome: ChildOutcome) -> list[str]:
    """Why the timings of a run that reported ok cannot be trusted: each shape's timing_doubts (with the parent's
    clock over it, where it saw the shape's `shape` message), the child's shapes against how long it ran, and a
    timing without its `shape` message."""
    doubts = []
    timings = outcome.events("timing")
    parent = parent_clocks(outcome)
    for message in timings:
        for doubt in timing_doubts(message, parent.get(id(message))):
            doubts.append(f"{message.get('key') or message['shape']}: {doubt}")
    total_host_s = sum(m["integrity"]["shape_host_us"] for m in timings) / 1e6
    if outcome.wall_s and total_host_s > outcome.wall_s * CLOCK_TOLERANCE:
        doubts.append(
            f"the child's shapes add up to {total_host_s:.2f} s, longer than the child ran ({outcome.wall_s:.2f} s)"
        )
    missing = [m.get("key") for m in timings if id(m) not in parent]
    if outcome.arrivals and missing:
        doubts.append(f"no `shape` message came before the timing of {', '.join(map(str, missing))}")
    return doubts


def parent_clocks(outcome: ChildOutcome) -> dict[int, ParentClock]:
    """For each timing message (by id), the parent's clock from its shape's `shape` message to it, in us: the least
    and the most it can have been, from each message's sending interval [sent_after, arrival]
    (ksci/evaluate/run/report_pipe.py; an outcome without sent_after times counts each arrival as its sending)."""
    if len(outcome.arrivals) != len(outcome.messages):
        return {}
    sent_after = outcome.sent_after if len(outcome.sent_after) == len(outcome.messages) else outcome.arrivals
    started: dict[str, tuple[float, float]] = {}
    elapsed = {}
    for message, early, late in zip(outcome.messages, sent_after, outcome.arrivals, strict=True):
        if message["event"] == "shape":
            started[message["key"]] = (early, late)
        elif message["event"] == "timing" and message.get("key") in started:
            shape_early, shape_late = started.pop(message["key"])
            elapsed[id(message)] = ParentClock(max(0.0, early - shape_late) * 1e6, (late - shape_early) * 1e6)
    return elapsed


def faster_than_light(timings: list[ShapeTiming]) -> str | None:
    """Why a run's timings cannot be trusted when a shape's kernel time is below its speed of light (no honest
    measurement is); None when none is."""
    too_fast = [s for s in timings if s.kernel and s.speed_of_light_us and s.kernel.median_us < s.speed_of_light_us]
    if not too_fast:
        return None
    names = ", ".join(
        f"{shape_key(s.shape)} ({s.kernel.median_us:.2f} < {s.speed_of_light_us:.2f} us)" for s in too_fast
    )
    return f"faster than the speed of light on {names}: the measurement cannot be trusted"
