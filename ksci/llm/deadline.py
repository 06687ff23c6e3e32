"""A wall-clock deadline for one LLM call.

httpx's timeouts are per operation: a read timeout of 10 s is never reached by a body trickled a byte every 3 s,
and such a call hung a whole run. Two things bound it here:
- the call runs in a daemon thread and its caller waits for it until the deadline only (`within_deadline`): the
  caller's answer comes on time whatever the socket does;
- the HTTP client's transport stops reading a body once the deadline has passed (DeadlineTransport raises httpx's
  ReadTimeout at the next chunk), so the thread itself ends within one read timeout after it, and no socket is
  left open behind a run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import httpx

T = TypeVar("T")
CONNECT_TIMEOUT_S = 10.0


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, deadline: float, request: httpx.Request) -> None:
        self.inner, self.deadline, self.request = inner, deadline, request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.deadline:
                raise httpx.ReadTimeout("the answer did not arrive before the call's deadline", request=self.request)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's own transport whose response bodies stop at `deadline` (time.monotonic())."""

    def __init__(self, deadline: float) -> None:
        super().__init__(retries=0)
        self.deadline = deadline

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.stream = _DeadlineStream(response.stream, self.deadline, request)
        return response


def deadline_client(timeout_s: float) -> httpx.Client:
    """An HTTP client for one call: every read and connect within `timeout_s`, the body within `timeout_s` in all."""
    deadline = time.monotonic() + timeout_s
    timeout = httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
    return httpx.Client(transport=DeadlineTransport(deadline), timeout=timeout, follow_redirects=False)


def within_deadline(work: Callable[[], T], timeout_s: float, late: Callable[[], T]) -> T:
    """`work()` in a daemon thread; its value if it ends within `timeout_s`, else `late()` (the thread, left to end
    by itself, cannot keep the process alive)."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the caller, which decides what it means
            errors.append(exc)

    thread = threading.Thread(target=run, name="llm-call", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return late()
    if errors:
        raise errors[0]
    return box[0]
