"""Prefect's test harness (a temporary API server on a free port), started again when its start-up health check
fails with a transport error that Prefect's own start loop does not retry.

Prefect picks the port by binding port 0 and letting it go, then starts uvicorn on it; only a refused connection
(httpx.ConnectError) is waited out. With several test processes starting servers at once, the health check once
met another process on that port and got "connection reset by peer" (httpx.ReadError), which failed the setup of a
whole module in CI. A new attempt takes a new port."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
from prefect.testing.utilities import prefect_test_harness

ATTEMPTS = 3


@contextlib.contextmanager
def prefect_harness(server_startup_timeout: int = 180) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                stack.enter_context(prefect_test_harness(server_startup_timeout=server_startup_timeout))
                break
            except httpx.TransportError:
                if attempt == ATTEMPTS:
                    raise
        yield
