"""Run foreign code in a child process that cannot take the caller down.

The child gets its own process group (a hard timeout kills the whole group), writes its output to a file
(so a chatty or stuck grandchild cannot block a pipe), and reports through a dedicated pipe as JSON lines.
A child may be started ahead of its run (`Child`): it prepares (imports its libraries) until the parent sends it
the go-ahead, one JSON line on its stdin, and only then does its work; the timeout counts from the go-ahead. Its
stdin then stays open until the GPU is clear to time on (no earlier run's process still exiting on it: the lease's
wait_for_exits, ksci.devices.Lease), and a child that times waits for that end of file first. Once the child has
reported its result, the run hands its GPU over (the next candidate starts while this process exits) and the child
has EXIT_GRACE_S to be gone; one still there is killed, and its run is not ok (`lingered`).
A run that is being stopped (Ctrl-C, SIGTERM: `stop_children`) kills every live child's group at once and starts
no new one; a child killed so raises `StoppedByUser` instead of returning an outcome, so that the task fails (not
cached) and no verdict of a kernel that was only interrupted is recorded.
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
from typing import TYPE_CHECKING

from ksci.evaluate.run.report_pipe import read_reports
from ksci.evaluate.sandbox.bounds import harness_overflow, limit, with_file_size_limit

if TYPE_CHECKING:
    from ksci.devices import Lease

OUTPUT_TAIL_CHARS = 8000
# The longest a child may take to exit after reporting its result: an honest harness leaves at once (os._exit) and its
# driver's teardown takes tenths of a second; a run waiting for that GPU's exits (ksci.devices.Lease) waits this long
# at most.
EXIT_GRACE_S = 20.0
SETTLE_POLL_S = 0.05  # how often a run waiting for its child's result also looks whether the child has ended
_LIVE: set[int] = set()  # process-group ids of the children started and not yet reaped
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


class StoppedByUser(RuntimeError):
    """The run is being stopped (a signal): a child was killed, or none may start."""


def stop_children() -> None:
    """Kill the process group of every live child and let no new one start (the run stops; idempotent)."""
    _STOPPING.set()
    with _LIVE_LOCK:
        groups = list(_LIVE)
    for pgid in groups:
        _kill_group(pgid)


def stopping() -> bool:
    return _STOPPING.is_set()


def live_children() -> frozenset[int]:
    """The process ids of this process's children started and not yet reaped (harness children among them: the
    next candidate's on a GPU this run handed over, spares)."""
    with _LIVE_LOCK:
        return frozenset(_LIVE)


@dataclass
class ChildOutcome:
    messages: list[dict] = field(default_factory=list)  # validated JSON objects from the report pipe
    # When each message reached the parent (time.monotonic(), one per message): the parent's own clock, which the
    # child's code cannot touch, held against the child's reports (ksci/evaluate/judge/timing_rules.py timing_doubts).
    arrivals: list[float] = field(default_factory=list)
    # The last time the parent saw the report pipe empty before each message (it was written after): with
    # `arrivals`, an interval that widens honestly where the parent paused (ksci/evaluate/run/report_pipe.py).
    sent_after: list[float] = field(default_factory=list)
    returncode: int | None = None  # negative: killed by that signal
    timed_out: bool = False
    output: str = ""  # tail of the child's stdout and stderr
    wall_s: float = 0.0  # from the go-ahead to the child's end
    bad_messages: int = 0  # report lines that were not JSON objects with an "event"
    first_s: dict[str, float] = field(default_factory=dict)  # event -> seconds from the go-ahead to its first message
    handed_over_s: float | None = None  # seconds from the go-ahead to when its GPU was handed over (its result)
    lingered: bool = False  # still running EXIT_GRACE_S after its result, so killed
    over_limit: str = (
        ""  # its stdout and stderr or its report pipe went past their bound (ksci.evaluate.sandbox.bounds)
    )

    def last(self, event: str) -> dict | None:
        return next((m for m in reversed(self.messages) if m["event"] == event), None)

    def events(self, event: str) -> list[dict]:
        return [m for m in self.messages if m["event"] == event]

    def reported_error(self) -> dict | None:
        """The exception the child reported before it ended (a device fault, or any other in the harness)."""
        return self.last("runtime_error") or self.last("harness_error")


class Child:
    """A child process started now and run later: `run` sends it the go-ahead and waits for it.

    argv gets `--report-fd N` appended. Until `run`, the child may prepare but must wait for the go-ahead on its
    stdin (a JSON object on one line, then end of file); a child that reads end of file without one must exit, since
    its parent gave up on it. `close` (or leaving the `with` block) kills the process group, run or not."""

    def __init__(self, argv: list[str], env: dict | None = None, cwd: Path | None = None) -> None:
        if _STOPPING.is_set():
            raise StoppedByUser("the run is stopping: no new child process")
        read_fd, write_fd = os.pipe()
        self.outcome = ChildOutcome()
        self._arrived: dict[str, float] = {}  # event -> monotonic time of its first message
        self._output = tempfile.TemporaryFile(mode="w+b")
        self._limit = limit("KSCI_MAX_HARNESS_OUTPUT_BYTES")  # its stdout and stderr file, its report pipe
        try:
            self._proc = subprocess.Popen(
                with_file_size_limit([*argv, "--report-fd", str(write_fd)], self._limit),
                pass_fds=(write_fd,),
                stdin=subprocess.PIPE,
                stdout=self._output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=cwd,
            )
        except BaseException:
            os.close(read_fd)
            self._output.close()
            raise
        finally:
            os.close(write_fd)
        with _LIVE_LOCK:
            _LIVE.add(self._proc.pid)  # its group id too (start_new_session)
        if _STOPPING.is_set():  # a stop that came while it started
            _kill_group(self._proc.pid)
        # Set at the child's result or the end of its report pipe (it exited, or closed the pipe): Child._wait.
        self._settled = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self._reader.start()
        self._ran = False

    def run(self, timeout_s: float, go: dict | None = None, lease: Lease | None = None) -> ChildOutcome:
        """Send the go-ahead (`go`, {} by default) and wait for the child, killing its group after timeout_s.

        `lease`: the GPU the child runs on (ksci.devices.current_lease), whose earlier runs must have exited before
        the child's stdin closes (it times only after that), and which is handed over once the child has reported
        its result."""
        if self._ran:
            raise RuntimeError("a child runs once")
        self._ran = True
        outcome, proc = self.outcome, self._proc
        start = time.monotonic()
        deadline = start + timeout_s
        try:
            proc.stdin.write(json.dumps(go or {}).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            pass  # the child is gone already (BrokenPipeError): its exit status says how
        try:
            if lease is not None:
                lease.wait_for_exits(deadline)
        finally:  # whatever happened, the child must not wait for its end of file until its timeout
            try:
                proc.stdin.close()
            except OSError:
                pass
        outcome.returncode = self._wait(start, deadline, lease)
        _kill_group(proc.pid)  # grandchildren left behind by a child that exited
        self._forget()
        if lease is not None:
            lease.exited()
        if _STOPPING.is_set() and outcome.returncode is not None and outcome.returncode < 0:
            raise StoppedByUser(f"the run is stopping: child {proc.pid} was killed")
        outcome.wall_s = time.monotonic() - start
        self._reader.join(timeout=10)
        # A message that came before the go-ahead (a child that did not wait for it) counts as coming at it.
        outcome.first_s = {event: max(0.0, at - start) for event, at in list(self._arrived.items())}
        self._output.seek(0, os.SEEK_END)
        if self._output.tell() >= self._limit:  # RLIMIT_FSIZE stopped its writes there
            outcome.over_limit = harness_overflow()
        self._output.seek(max(0, self._output.tell() - OUTPUT_TAIL_CHARS))
        outcome.output = self._output.read().decode(errors="replace")
        return outcome

    def _wait(self, start: float, deadline: float, lease: Lease | None) -> int:
        """The child's exit status: it gets until `deadline`, and EXIT_GRACE_S after its result at most; the lease
        is handed over at the result."""
        outcome, proc = self.outcome, self._proc
        exit_by = deadline
        # Until the result, the end of the report pipe or the child's own end (a grandchild may hold the pipe open).
        while not self._settled.wait(SETTLE_POLL_S) and proc.poll() is None and time.monotonic() < deadline:
            pass
        if "result" in self._arrived:
            now = time.monotonic()
            if lease is not None:
                lease.hand_over()
                outcome.handed_over_s = now - start
            exit_by = min(deadline, now + EXIT_GRACE_S)
        try:
            return proc.wait(timeout=max(0.0, exit_by - time.monotonic()))
        except subprocess.TimeoutExpired:
            outcome.lingered, outcome.timed_out = exit_by < deadline, exit_by >= deadline
            _kill_group(proc.pid)
            return proc.wait()

    def close(self) -> None:
        if not self._ran:  # never given its go-ahead: kill it with its group (run killed and reaped it already)
            _kill_group(self._proc.pid)  # before wait(): until it is reaped, its group id cannot be reused
            self._proc.wait()
            self._forget()
        if self._proc.stdin and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        self._output.close()

    def _read(self, fd: int) -> None:
        try:
            read_reports(fd, self.outcome, self._arrived, on_result=self._settled.set, limit_bytes=self._limit)
        finally:
            self._settled.set()

    def _forget(self) -> None:
        """Reaped: its group id may be reused by another process, so it is never killed again."""
        with _LIVE_LOCK:
            _LIVE.discard(self._proc.pid)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_child(argv: list[str], timeout_s: float, env: dict | None = None, cwd: Path | None = None) -> ChildOutcome:
    """Start argv + ["--report-fd", N], give it the go-ahead at once, and kill its group after timeout_s."""
    with Child(argv, env=env, cwd=cwd) as child:
        return child.run(timeout_s)


def run_in_group(
    argv: list[str], timeout_s: float, cwd: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, timeout=...) for a tool such as the compiler, in a
    process group of its own: a terminal's Ctrl-C does not reach it (a compiler killed so failed, and the failure was
    cached and recorded as the candidate's compile_error), a timeout kills its whole group (nvcc's cicc and ptxas
    too, which subprocess.run leaves running), and a run that is stopping (`stop_children`) kills it and raises
    StoppedByUser instead of returning a failure. Raises subprocess.TimeoutExpired as subprocess.run does."""
    if _STOPPING.is_set():
        raise StoppedByUser("the run is stopping: no new process")
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(argv, timeout_s, output=out, stderr=err) from None
    finally:
        _kill_group(proc.pid)  # what it left in its group (reaped now: see Child.run)
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)
    if _STOPPING.is_set() and proc.returncode < 0:
        raise StoppedByUser(f"the run is stopping: {argv[0]} was killed")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
