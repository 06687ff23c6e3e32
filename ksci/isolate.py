"""Run foreign code in a child process that cannot take the caller down.

The child gets its own process group (a hard timeout kills the whole group), writes its output to a file
(so a chatty or stuck grandchild cannot block a pipe), and reports through a dedicated pipe as JSON lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

OUTPUT_TAIL_CHARS = 8000


@dataclass
class ChildOutcome:
    messages: list[dict] = field(default_factory=list)  # validated JSON objects from the report pipe
    returncode: int | None = None  # negative: killed by that signal
    timed_out: bool = False
    output: str = ""  # tail of the child's stdout and stderr
    wall_s: float = 0.0
    bad_messages: int = 0  # report lines that were not JSON objects with an "event"
    first_s: dict[str, float] = field(default_factory=dict)  # event -> seconds from the start to its first message

    def last(self, event: str) -> dict | None:
        return next((m for m in reversed(self.messages) if m["event"] == event), None)

    def events(self, event: str) -> list[dict]:
        return [m for m in self.messages if m["event"] == event]


def run_child(argv: list[str], timeout_s: float, env: dict | None = None, cwd: Path | None = None) -> ChildOutcome:
    """Run argv + ["--report-fd", N]; kill its process group after timeout_s seconds."""
    read_fd, write_fd = os.pipe()
    outcome = ChildOutcome()
    start = time.monotonic()
    reader = threading.Thread(target=_read_reports, args=(read_fd, outcome, start), daemon=True)
    with tempfile.TemporaryFile(mode="w+b") as output:
        try:
            proc = subprocess.Popen(
                [*argv, "--report-fd", str(write_fd)],
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=cwd,
            )
        finally:
            os.close(write_fd)
        reader.start()
        try:
            outcome.returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
            _kill_group(proc.pid)
            outcome.returncode = proc.wait()
        _kill_group(proc.pid)  # grandchildren left behind by a child that exited
        outcome.wall_s = time.monotonic() - start
        reader.join(timeout=10)
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - OUTPUT_TAIL_CHARS))
        outcome.output = output.read().decode(errors="replace")
    return outcome


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_reports(fd: int, outcome: ChildOutcome, start: float) -> None:
    with os.fdopen(fd, "rb") as stream:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                outcome.bad_messages += 1
                continue
            if isinstance(message, dict) and isinstance(message.get("event"), str):
                outcome.messages.append(message)
                outcome.first_s.setdefault(message["event"], time.monotonic() - start)
            else:
                outcome.bad_messages += 1
