"""Settings for Prefect's embedded default: an ephemeral API whose state lives under the project's data/."""

from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ksci import PROJECT_ROOT

EMBEDDED_CLIENT_RETRIES = 7  # Prefect's client retries against the embedded API (EmbeddedApi.start)


def configure_prefect() -> None:
    """Call before importing prefect. Explicit settings in the environment (or PREFECT_API_URL) win."""
    os.environ.setdefault("PREFECT_HOME", str(PROJECT_ROOT / "data" / "prefect"))
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "true")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # Concurrency-slot leases on disk, as prefect.toml sets them for a server (no GPU slots since ksci/devices.py
    # locks the GPUs; kept so that the embedded API and a server keep leases alike).
    os.environ.setdefault(
        "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE", "prefect.server.concurrency.lease_storage.filesystem"
    )


class EmbeddedApi:
    """The embedded Prefect API of one `ksci evolve`: the server Prefect would start as its ephemeral one (the same
    uvicorn command as prefect.server.api.server.SubprocessASGIServer, with PREFECT__SERVER_EPHEMERAL, so with the
    ephemeral set of services; run through `serve`, so that it ends with ksci), started by ksci in a process group
    of its own before Prefect is imported, and handed to Prefect as its PREFECT_API_URL.

    Why its own group: a terminal's Ctrl-C goes to its whole foreground process group. Prefect's own ephemeral
    server is in it, died at once, and the run then spent minutes retrying "Error logging to API". Here only the
    main process gets the signal; it ends the flow run (whose Crashed state then still reaches the API) and only
    then stops the server (`stop`). Why before Prefect's import: Prefect reads PREFECT_API_URL into its root
    settings when it is imported. Its output goes to the run's log file, not the terminal."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> subprocess.Popen:
        """Start the server process (it takes seconds to answer: `wait_ready`)."""
        port = _free_port()
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        argv = [
            sys.executable,
            "-m",
            "ksci.embedded",
            str(os.getpid()),
            "--factory",
            "prefect.server.api.server:create_app",
        ]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        self.url = f"http://127.0.0.1:{port}/api"
        os.environ["PREFECT_API_URL"] = self.url
        # Its SQLite database answers 503 while another writer holds it, and Prefect's client gives up after five
        # retries (about a minute): on a loaded 2-core machine a busy spell outlasted them and stopped a run mid
        # generation. This server is the run's own, so a 503 from it means busy, not gone (its exit ends the run
        # anyway): seven retries wait up to about four minutes. A value in the environment wins.
        os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", str(EMBEDDED_CLIENT_RETRIES))
        # No UI runs here (PREFECT_UI_ENABLED=0) and the server ends with the run: no "View at http://..." link in
        # the run's log (Prefect writes none when its UI URL is empty).
        os.environ.setdefault("PREFECT_UI_URL", "")
        return self.process

    def wait_ready(self) -> None:
        """Until the API answers its health check; EnvironmentProblem if the server ended or did not answer in
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS."""
        import httpx

        from ksci.evaluate.options import EnvironmentProblem

        deadline = time.monotonic() + float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90"))
        with httpx.Client(timeout=5) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise EnvironmentProblem(f"the embedded Prefect server ended at start (see {self.log_path})")
                with contextlib.suppress(httpx.TransportError):
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                time.sleep(0.2)
        raise EnvironmentProblem(f"the embedded Prefect server did not answer at {self.url} (see {self.log_path})")

    def kill(self) -> None:
        """At once (a second Ctrl-C): SIGKILL to the server's process group."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def stop(self) -> None:
        """In order, once the flow run has ended: SIGTERM, up to 5 s, then SIGKILL, as SubprocessASGIServer.stop."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()
        self.kill()  # anything it left in its group
        self.process = None


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def serve(argv: list[str]) -> None:
    """The server's process (`python -m ksci.embedded PARENT_PID UVICORN_ARGS...`): on Linux, first ask the kernel
    for a SIGTERM when PARENT_PID, the `ksci evolve` that started it, ends, then run uvicorn as `python -m uvicorn`
    does. `stop` and `kill` end the server when ksci ends in order; a `kill -9` of ksci (or the OOM killer) runs
    neither, and the server, in a process group of its own, kept running, reparented to init (one was found left
    by tests/test_faults.py's kill -9). The request holds across uvicorn's start; elsewhere it is not made."""
    parent, uvicorn_args = int(argv[0]), argv[1:]
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent ended before the request took hold
            return
    sys.argv = ["uvicorn", *uvicorn_args]
    runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    serve(sys.argv[1:])
