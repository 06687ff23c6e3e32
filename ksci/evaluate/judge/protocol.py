"""What the harness child may say on its report pipe: one JSON schema per event, and the timing-integrity checks.

The child runs the candidate's host code in its own process, so the parent trusts none of its messages blindly:
a message of an unknown event, with missing or mistyped fields, or too large, is counted as bad, and a run with
bad messages is never `ok`. Timing messages carry the host's wall-clock totals beside the event times, which
`timing_doubts` holds against each other and against the parent's own clock (docs/threat-model.md).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

from jsonschema import Draft202012Validator

MAX_MESSAGE_BYTES = 256 * 1024
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

_NUMBER = {"type": "number"}
_INT = {"type": "integer"}
_TEXT = {"type": "string", "maxLength": 20000}
_SHAPE = {"type": "object", "additionalProperties": _INT, "maxProperties": 16}
_STATS = {
    "type": "object",
    "properties": {"median_us": _NUMBER, "iqr_us": _NUMBER, "min_us": _NUMBER, "reps": _INT},
    "required": ["median_us", "iqr_us", "min_us", "reps"],
    "additionalProperties": False,
}
_STATS_OR_NULL = {"anyOf": [_STATS, {"type": "null"}]}
_INTEGRITY = {
    "type": "object",
    "properties": {
        "calls": _INT,
        "checked": _INT,
        "flush_us": _NUMBER,
        "gap_us": _NUMBER,
        "gap_idle_us": _NUMBER,
        "tail_us": _NUMBER,
        "tail_idle_us": _NUMBER,
        "sync_us": _NUMBER,
        "sync_idle_us": _NUMBER,
        "samples_us": {"type": "array", "items": _NUMBER, "minItems": 1, "maxItems": 1000},
        "shape_host_us": _NUMBER,
        "raced_against_us": _NUMBER,  # present when the calls stopped because the kernel lost the shape (--race)
    },
    "required": [
        "calls",
        "checked",
        "flush_us",
        "gap_us",
        "gap_idle_us",
        "tail_us",
        "tail_idle_us",
        "sync_us",
        "sync_idle_us",
        "samples_us",
        "shape_host_us",
    ],
    "additionalProperties": False,
}
_WORK = {"flops": _NUMBER, "bytes": _NUMBER, "shape": _SHAPE, "key": _TEXT}
_BASELINES = {
    "reference": _STATS_OR_NULL,
    "vendor": _STATS_OR_NULL,
    "vendor_ok": {"type": "boolean"},
    "vendor_error": _TEXT,
    "vendor_relative_error": _NUMBER,
}
_CHECK = {
    "phase": _TEXT,
    "profile": _TEXT,
    "shape": _SHAPE,
    "seed": _INT,
    "ok": {"type": "boolean"},
    "report": _TEXT,
    "mismatches": _INT,
    "total": _INT,
    "max_abs_error": _NUMBER,
    "nan_or_inf": _INT,
}


def _event(properties: dict, required: tuple[str, ...] = (), closed: bool = True) -> dict:
    schema = {"type": "object", "properties": {"event": {"type": "string"}, **properties}}
    schema["required"] = ["event", *required]
    if closed:
        schema["additionalProperties"] = False
    return schema


SCHEMAS = {
    "started": _event({"fingerprint": {"type": "object", "maxProperties": 64}}, ("fingerprint",)),
    "sandbox": _event(
        {
            "network": _TEXT,
            "limits": {"type": "object", "maxProperties": 16},
            **dict.fromkeys(("mounts", "proc", "capabilities", "syscalls"), _TEXT),
        }
    ),
    "denied": _event({"syscall": _TEXT}, ("syscall",)),
    "loaded": _event({}),
    "shape": _event({"key": _TEXT}, ("key",)),
    "load_error": _event({"message": _TEXT}, ("message",)),
    "check": _event(_CHECK, ("shape", "seed", "ok", "report", "mismatches", "total", "max_abs_error", "nan_or_inf")),
    # A held-out shape whose inputs the problem's reference cannot make (a derived contract wider than it allows).
    "skipped": _event({"shape": _SHAPE, "seed": _INT, "profile": _TEXT, "reason": _TEXT}, ("shape", "seed", "reason")),
    "timing": _event(
        {**_WORK, **_BASELINES, "kernel": _STATS, "integrity": _INTEGRITY},
        ("shape", "flops", "bytes", "kernel", "integrity"),
    ),
    "baseline": _event({**_WORK, **_BASELINES}, ("shape", "flops", "bytes")),
    "result": _event({"status": {"enum": ["ok", "wrong"]}, "message": _TEXT}, ("status",)),
    "runtime_error": _event({"message": _TEXT, "trace": _TEXT}, ("message",)),
    "harness_error": _event({"message": _TEXT, "trace": _TEXT}, ("message",)),
}
_VALIDATORS = {event: Draft202012Validator(schema) for event, schema in SCHEMAS.items()}


def validate_message(message: dict) -> str | None:
    """None when the message is one the child may send, else why not."""
    event = message.get("event")
    if event not in _VALIDATORS:
        return f"unknown event {event!r}"
    if len(json.dumps(message)) > MAX_MESSAGE_BYTES:
        return f"{event} message larger than {MAX_MESSAGE_BYTES} bytes"
    error = next(iter(_VALIDATORS[event].iter_errors(message)), None)
    return None if error is None else f"{event}: {error.message[:200]}"


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
