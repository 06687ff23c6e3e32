"""What the harness child may say on its report pipe: one JSON schema per event, and the timing-integrity checks.

The child runs the candidate's host code in its own process, so the parent trusts none of its messages blindly:
a message of an unknown event, with missing or mistyped fields, or too large, is counted as bad, and a run with
bad messages is never `ok`. Timing messages carry the host's wall-clock totals beside the event times, which
`timing_doubts` holds against each other and against the parent's own clock (docs/threat-model.md).
"""

from __future__ import annotations

import json
import statistics

from jsonschema import Draft202012Validator

MAX_MESSAGE_BYTES = 256 * 1024
# Host time the events do not account for, per batch, before the run is doubted: launch and wake-up latency of
# an honest batch is tens of microseconds; a patched timer or work hidden outside the region costs the kernel's time.
SLACK_PER_BATCH_US = 1000.0
UNACCOUNTED_FACTOR = 2.0
# Device work still running after the timed stream finished, in every batch: more than this is another stream's.
LEFTOVER_FLOOR_US = 100.0
LEFTOVER_FRACTION = 0.5
CLOCK_TOLERANCE = 1.02

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
        "host_us": _NUMBER,
        "event_us": _NUMBER,
        "flush_us": _NUMBER,
        "batches": _INT,
        "leftover_us": {"type": "array", "items": _NUMBER, "minItems": 1, "maxItems": 1000},
    },
    "required": ["host_us", "event_us", "flush_us", "batches", "leftover_us"],
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
    "sandbox": _event({"network": _TEXT, "limits": {"type": "object", "maxProperties": 16}}),
    "loaded": _event({}),
    "load_error": _event({"message": _TEXT}, ("message",)),
    "check": _event(_CHECK, ("shape", "seed", "ok", "report", "mismatches", "total", "max_abs_error", "nan_or_inf")),
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


def timing_doubts(message: dict, child_wall_s: float | None) -> list[str]:
    """Why the kernel's timing on one shape cannot be trusted (empty when it can)."""
    integrity, kernel = message["integrity"], message["kernel"]
    host, events, flush = integrity["host_us"], integrity["event_us"], integrity["flush_us"]
    batches, reps = max(1, integrity["batches"]), kernel["reps"]
    doubts = []
    if kernel["min_us"] <= 0 or not (kernel["min_us"] <= kernel["median_us"]) or reps < 1:
        doubts.append(f"implausible statistics (min {kernel['min_us']:.3g} us, median {kernel['median_us']:.3g} us)")
    if events > host * CLOCK_TOLERANCE + 100.0:
        doubts.append(f"the events add up to {events:.0f} us but only {host:.0f} us passed on the host clock")
    if child_wall_s is not None and host > child_wall_s * 1e6 * CLOCK_TOLERANCE:
        doubts.append(f"the child reports {host / 1e6:.2f} s of timed batches but ran {child_wall_s:.2f} s in all")
    unaccounted = host - flush * reps - events
    if unaccounted > UNACCOUNTED_FACTOR * events + SLACK_PER_BATCH_US * batches:
        doubts.append(
            f"the host waited {unaccounted / reps:.1f} us per repetition that the events do not account for "
            f"(median {kernel['median_us']:.2f} us): work outside the timed region, or a patched timer"
        )
    leftover = min(integrity["leftover_us"])
    if leftover > max(LEFTOVER_FLOOR_US, LEFTOVER_FRACTION * kernel["median_us"]):
        doubts.append(
            f"device work went on for at least {leftover:.0f} us after every timed batch "
            f"(median {statistics.median(integrity['leftover_us']):.0f} us): work on a stream of the kernel's own"
        )
    return doubts
