"""The child-process runner: reports, crashes, hangs and the process-group kill (no GPU needed)."""

from __future__ import annotations

import os
import time

import pytest
from children import reporting_child

import ksci.evaluate.run.isolate
from ksci.evaluate.run.isolate import Child, run_child


def test_reports_arrive_and_bad_lines_are_counted(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        send("started")
        report.write("not json\\n")
        report.write(json.dumps([1, 2]) + "\\n")
        print("some noise on stdout")
        send("result", status="ok")
    """,
    )
    outcome = run_child(argv, timeout_s=60)
    assert outcome.returncode == 0 and not outcome.timed_out
    assert [m["event"] for m in outcome.messages] == ["started", "result"]
    assert outcome.bad_messages == 2
    assert "some noise on stdout" in outcome.output


def test_the_first_message_of_each_event_is_stamped_with_when_it_came(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        import time
        send("started")
        time.sleep(1.0)
        send("loaded")
        send("loaded")
        send("result", status="ok")
    """,
    )
    outcome = run_child(argv, timeout_s=60)
    assert set(outcome.first_s) == {"started", "loaded", "result"}
    # Ordered as sent, with the sleep between them: stamped as each line came, not all at the end. Not compared
    # with wall_s: the reader thread may take the last line after the parent has seen the child exit. The margin
    # is wide (half the sleep) because on a loaded host the reader may take the first line late (seen: 0.05 s late
    # with four test processes on two cores, and a stamp of 0.0 s on a coarse clock).
    assert 0 <= outcome.first_s["started"] < outcome.first_s["loaded"] <= outcome.first_s["result"]
    assert outcome.first_s["loaded"] - outcome.first_s["started"] >= 0.5


def test_a_child_started_ahead_waits_for_the_go_ahead_and_its_times_count_from_it(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        send("ready")
        go = json.loads(sys.stdin.readline())
        send("go", go=go, more=sys.stdin.read())
        send("result", status="ok")
    """,
    )
    with Child(argv) as child:
        time.sleep(1.5)  # the child is up and waiting meanwhile
        outcome = child.run(timeout_s=60, go={"env": {"CUDA_VISIBLE_DEVICES": "3"}})
    assert outcome.returncode == 0, outcome.output
    (go,) = outcome.events("go")
    assert go["go"] == {"env": {"CUDA_VISIBLE_DEVICES": "3"}} and go["more"] == ""  # one line, then end of file
    assert outcome.first_s["ready"] == 0.0  # came before the go-ahead: counted as at it
    # Counted from the go-ahead, not from the start 1.5 s earlier (no claim about how fast the child answers).
    assert outcome.first_s["go"] < 1.5 and outcome.wall_s < 1.5 + 60


def test_a_child_closed_without_its_go_ahead_never_runs_and_leaves_nothing_behind(tmp_path):
    ran, pid_file = tmp_path / "ran", tmp_path / "pid"
    argv = reporting_child(
        tmp_path,
        f"""
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        sys.stdin.readline()
        open({str(ran)!r}, "w").write("ran")
    """,
    )
    with Child(argv):
        for _ in range(100):  # until the child is up
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid) and not ran.exists()


def test_a_crash_is_seen_as_a_signal(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        send("loaded")
        import ctypes
        ctypes.string_at(0)  # segmentation fault
    """,
    )
    outcome = run_child(argv, timeout_s=60)
    assert outcome.returncode < 0 and outcome.last("loaded") is not None and outcome.last("result") is None


def test_a_hang_is_killed_with_its_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    argv = reporting_child(
        tmp_path,
        f"""
        import subprocess, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(grandchild.pid))
        send("started")
        while True:
            time.sleep(1)
    """,
    )
    start = time.monotonic()
    outcome = run_child(argv, timeout_s=3)
    assert outcome.timed_out and time.monotonic() - start < 30
    grandchild = int(pid_file.read_text())
    for _ in range(50):  # the kill is immediate; reaping by init may take a moment
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), "the grandchild outlived the timeout"


class RecordingLease:
    """Stands in for ksci.devices.Lease: when the run waited for earlier exits and when it handed the GPU over."""

    def __init__(self, exits_take_s: float = 0.0) -> None:
        self.exits_take_s, self.waited_at, self.handed_at, self.exited_at = exits_take_s, None, None, None

    def wait_for_exits(self, deadline: float) -> bool:
        time.sleep(self.exits_take_s)
        self.waited_at = time.monotonic()
        return True

    def hand_over(self) -> None:
        self.handed_at = time.monotonic()

    def exited(self) -> None:
        self.exited_at = time.monotonic()


def test_a_child_times_only_after_earlier_exits_and_hands_its_gpu_over_at_its_result(tmp_path):
    """Stdin stays open after the go-ahead until the lease's earlier runs have exited; the GPU is handed over when
    the result comes, before the child's own exit (here a second of "teardown"), and the outcome says when."""
    argv = reporting_child(
        tmp_path,
        """
        import time
        go = json.loads(sys.stdin.readline())
        send("started")
        sys.stdin.read()  # the end of file: clear to time
        send("timing")
        send("result", status="ok")
        report.flush()
        time.sleep(1.0)
    """,
    )
    lease = RecordingLease(exits_take_s=0.5)
    with Child(argv) as child:
        begun = time.monotonic()
        outcome = child.run(timeout_s=60, go={}, lease=lease)
    assert outcome.returncode == 0 and not outcome.lingered, outcome.output
    assert outcome.first_s["timing"] >= 0.5  # not before the earlier exits were over
    assert lease.waited_at - begun <= outcome.first_s["timing"] + 0.05
    assert outcome.handed_over_s == pytest.approx(lease.handed_at - begun, abs=0.05)
    assert outcome.first_s["result"] <= outcome.handed_over_s <= outcome.wall_s - 0.5  # before the exit's second
    assert lease.exited_at - begun >= outcome.handed_over_s + 0.5  # the exit lock, once the process was gone


def test_a_child_still_running_after_its_result_is_killed_after_the_grace(tmp_path, monkeypatch):
    """An honest harness leaves at once after its result; one that goes on (a candidate's thread, a fake result
    sent early) is killed EXIT_GRACE_S after it, and the outcome says it lingered (classify: not ok)."""
    monkeypatch.setattr(ksci.evaluate.run.isolate, "EXIT_GRACE_S", 0.5)
    argv = reporting_child(
        tmp_path,
        """
        import time
        send("result", status="ok")
        report.flush()
        time.sleep(600)
    """,
    )
    lease = RecordingLease()
    start = time.monotonic()
    with Child(argv) as child:
        outcome = child.run(timeout_s=120, go={}, lease=lease)
    assert outcome.lingered and not outcome.timed_out and outcome.returncode < 0
    assert time.monotonic() - start < 30 and lease.handed_at is not None


def test_without_a_lease_nothing_waits_and_a_crash_before_the_result_is_seen_at_once(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        sys.stdin.readline()
        send("go", more=sys.stdin.read())
        raise SystemExit(3)
    """,
    )
    start = time.monotonic()
    outcome = run_child(argv, timeout_s=120)
    assert outcome.returncode == 3 and outcome.handed_over_s is None and not outcome.lingered
    assert outcome.last("go")["more"] == "" and time.monotonic() - start < 30


def test_a_child_that_ends_without_a_result_is_seen_at_once_though_a_grandchild_holds_its_report_pipe(tmp_path):
    argv = reporting_child(
        tmp_path,
        """
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], pass_fds=(fd,))
        send("started")
        raise SystemExit(3)
    """,
    )
    start = time.monotonic()
    with Child(argv) as child:
        outcome = child.run(timeout_s=120, go={}, lease=RecordingLease())
    assert outcome.returncode == 3 and not outcome.timed_out and outcome.handed_over_s is None
    assert time.monotonic() - start < 30


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        return os.path.exists(f"/proc/{pid}")
