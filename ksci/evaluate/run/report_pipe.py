"""Read the harness child's report pipe and bound, on the parent's clock, when each message was written.

The parent holds the child's clock against its own (ksci.evaluate.judge.timing_rules.timing_doubts), so it must know when a
message was sent. The moment a Python thread reads a line is only an upper bound: a parent that pauses (its
interpreter lock held by another thread for a long C call, a full garbage collection, a fork, the process waiting
for a core on a loaded host) reads every message written during the pause at once, after it. Taken as the sending
time, that made an honest kernel `suspicious` ("the child's clock says the shape took 263.9 ms, the parent's 0.1
ms": both messages read in one go after a pause, issue 30). So each message gets an interval instead:

- `arrivals[i]`: the parent's clock right after the read that returned the message (it was written before);
- `sent_after[i]`: the last time the parent saw the pipe empty before that read (it was written after): the start
  of a wait that timed out with nothing to read, or of a read that drained the pipe (returned less than it asked).

While the parent keeps up, the two lie within one poll interval (5 ms) of each other and the clock rule is as
tight as before; across a pause the interval widens by the pause, honestly. A child cannot widen it by writing
more: a read that drains the pipe moves `sent_after` on, and only the parent's own pauses hold it back.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable

from ksci.evaluate.sandbox.bounds import harness_overflow

POLL_S = 0.005  # longest wait for the pipe without looking at the clock
READ_BYTES = 1 << 20  # more than a pipe holds (64 KiB by default, 1 MiB at most without privileges)


def read_reports(
    fd: int,
    outcome,
    arrived: dict[str, float],
    on_result: Callable[[], None] | None = None,
    limit_bytes: int | None = None,
) -> None:
    """Append each JSON-object line of `fd` to outcome.messages, with its arrival and sent_after times, until EOF.

    `arrived`: event -> the arrival of its first message. A line that is not a JSON object with an "event" counts
    in outcome.bad_messages. `on_result` is called after a "result" message was taken. Past `limit_bytes` read,
    outcome.over_limit says so and the pipe is closed (the child's next write fails).
    """
    pending, total = b"", 0
    empty_at = time.monotonic()
    with os.fdopen(fd, "rb", buffering=0) as stream:
        while True:
            waited_from = time.monotonic()
            if not select.select([stream], [], [], POLL_S)[0]:
                empty_at = waited_from  # nothing came during the whole wait
                continue
            read_from = time.monotonic()
            chunk = os.read(fd, READ_BYTES)
            now = time.monotonic()
            if not chunk:
                break
            total += len(chunk)
            if limit_bytes is not None and total > limit_bytes:
                outcome.over_limit = harness_overflow()
                return
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                _take(line, outcome, arrived, now, empty_at)
            if on_result is not None and "result" in arrived:
                on_result()
            if len(chunk) < READ_BYTES:
                empty_at = read_from  # the read emptied the pipe: whatever comes next was written after
    if pending.strip():
        _take(pending, outcome, arrived, time.monotonic(), empty_at)


def _take(line: bytes, outcome, arrived: dict[str, float], now: float, sent_after: float) -> None:
    try:
        message = json.loads(line)
    except ValueError:
        outcome.bad_messages += 1
        return
    if isinstance(message, dict) and isinstance(message.get("event"), str):
        outcome.messages.append(message)
        outcome.arrivals.append(now)
        outcome.sent_after.append(sent_after)
        arrived.setdefault(message["event"], now)
    else:
        outcome.bad_messages += 1
