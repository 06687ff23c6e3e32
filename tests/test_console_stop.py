"""ksci/console/stop.py without Prefect: a second Ctrl-C ends the process at once, and a stop that hangs ends it after
the grace time; either way one line, the signal's exit code, and the kill of what must not outlive the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A main thread that swallows the first stop and keeps working, as a flow that waits for its task threads does.
STUBBORN = textwrap.dedent("""
    import sys, time
    from ksci.console.stop import Interrupted, StopOnSignals, say_stopped
    stop = StopOnSignals(lambda why: say_stopped("demo", why), lambda: print("killed the API", flush=True),
                         grace_s=float(sys.argv[1]))
    with stop:
        try:
            print("ready", flush=True)
            time.sleep(60)
        except Interrupted:
            print("stopping", flush=True)
            time.sleep(60)  # a shutdown that does not end by itself
""")


def _started(grace_s: float) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", STUBBORN, str(grace_s)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline() == "ready\n"
    return process


def test_a_second_ctrl_c_ends_it_at_once():
    process = _started(grace_s=60)
    process.send_signal(signal.SIGINT)
    assert process.stdout.readline() == "stopping\n"
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=40)
    # At once, not after the 60 s grace time (the bound leaves room for a busy machine).
    assert time.monotonic() - sent < 30 and process.returncode == 130
    assert out == "killed the API\n"
    assert err.splitlines() == [
        "ksci: evolution demo stopped by Ctrl-C (SIGINT); every candidate recorded so far is kept: continue it with "
        "--run demo"
    ]


def test_a_stop_that_hangs_ends_after_the_grace_time_with_the_signals_code():
    process = _started(grace_s=1.5)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=40)
    took = time.monotonic() - sent
    # After the 1.5 s grace time; without it the stop hangs for good (the bound leaves room for a busy machine).
    assert 1.0 < took < 30 and process.returncode == 143, (took, process.returncode, out, err)
    assert out == "stopping\nkilled the API\n"
    assert len(err.splitlines()) == 1 and "stopped by SIGTERM" in err and "--run demo" in err


def test_a_tool_run_in_its_group_times_out_with_its_grandchildren(tmp_path):
    """The compiler's way to run (isolate.run_in_group): a timeout kills the whole group, not only its leader."""
    from ksci.evaluate.run.isolate import run_in_group

    pid_file = tmp_path / "grandchild"
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_group(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"], timeout_s=1.0)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{grandchild}").exists()
    assert run_in_group(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=10).returncode == 3


def test_a_stopping_run_kills_a_running_tool_and_says_so_instead_of_a_failure():
    """A harness child or a tool killed because the run stops raises StoppedByUser (its task fails, nothing is cached
    or recorded as the kernel's verdict), and no new one starts."""
    script = textwrap.dedent("""
        import threading, time
        from ksci.evaluate.run import isolate
        threading.Timer(1.0, isolate.stop_children).start()
        started = time.monotonic()
        harness = isolate.Child(["sh", "-c", "sleep 30"])  # a harness child, as ksci/evaluate/run/harness_process.py starts
        said = []

        def tool():
            try:
                isolate.run_in_group(["sleep", "30"], timeout_s=60)
            except isolate.StoppedByUser:
                said.append(f"tool stopped after {time.monotonic() - started:.0f} s")

        compiler = threading.Thread(target=tool)
        compiler.start()
        try:
            harness.run(timeout_s=60)
        except isolate.StoppedByUser:
            print(f"harness stopped after {time.monotonic() - started:.0f} s")
        harness.close()
        compiler.join(10)
        print(*said)
        try:
            isolate.run_in_group(["true"], timeout_s=60)
        except isolate.StoppedByUser:
            print("no new one")
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.splitlines() == ["harness stopped after 1 s", "tool stopped after 1 s", "no new one"], (
        out.stdout + out.stderr
    )
