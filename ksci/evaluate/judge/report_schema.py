"""What the harness child may say on its report pipe: one JSON schema per event (validate_message).

The child runs the candidate's host code in its own process, so the parent trusts none of its messages blindly:
a message of an unknown event, with missing or mistyped fields, or too large, is counted as bad, and a run with
bad messages is never `ok` (ksci/evaluate/judge/classify.py). What the timing messages' fields may show is judged
by ksci/evaluate/judge/timing_rules.py.
"""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

MAX_MESSAGE_BYTES = 256 * 1024

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
