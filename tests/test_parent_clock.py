"""The parent's clock against the child's, with a real child process and a real pause of the parent (issue 30).

An honest candidate was called `suspicious` ("the child's clock says the shape took 263.9 ms, the parent's 0.1 ms")
while the parent was busy. Reproduced here without a GPU: a stand-in child sends a shape's `shape` and `timing`
messages 300 ms apart and says so, while the parent's interpreter lock is held for 1.5 s (a C call that keeps it,
as a long garbage collection or a fork does). Both messages are read at once after the pause: taken as sending
times, the arrivals say 0.0 ms, which is the false suspicion; the sending intervals of ksci/evaluate/run/report_pipe.py
say "between 0 and about 1.5 s", and the verdict is ok. A child that lies about its clock without any pause of
the parent is still caught.
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
import time

from ksci.evaluate.judge.classify import classify
from ksci.evaluate.results import Status, Verdict
from ksci.evaluate.run.isolate import Child
from ksci.problem.spec import load_problem

PROBLEM = load_problem("fp8_gemm")
SHAPE = {"m": 1024, "n": 1536, "k": 7168, "seed": 1}
KEY = "1024x1536x7168"
# The stand-in child: waits for the go-ahead, then reports one shape whose timed calls took `real` seconds on its
# clock, saying they took `claimed` seconds.
CHILD = """
import json, os, sys, time
fd = int(sys.argv[sys.argv.index("--report-fd") + 1])
real, claimed, timing = float(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
out = os.fdopen(fd, "w", buffering=1)
def send(event, **fields):
    out.write(json.dumps({"event": event, **fields}) + "\\n"); out.flush()
sys.stdin.readline()
send("started", fingerprint={"gpu": "NVIDIA H200"})
send("loaded")
time.sleep(0.3)
send("shape", key="KEY")
time.sleep(real)
timing["integrity"]["shape_host_us"] = claimed * 1e6
send("timing", **timing)
send("result", status="ok")
""".replace("KEY", KEY)


def _timing() -> dict:
    stats = {"median_us": 100.0, "iqr_us": 0.1, "min_us": 100.0, "reps": 20}
    integrity = {"calls": 20, "checked": 8, "flush_us": 150.0, "gap_us": 41.0, "gap_idle_us": 40.0}
    integrity.update(tail_us=12.5, tail_idle_us=12.0, sync_us=4.0, sync_idle_us=3.5, shape_host_us=0.0)
    integrity["samples_us"] = [100.0 + 0.01 * (i % 7) for i in range(20)]
    work = {"flops": 2.0 * 1024 * 1536 * 7168, "bytes": 1024 * 7168 + 1536 * 7168 + 2 * 1024 * 1536}
    return {"shape": SHAPE, "key": KEY, **work, "kernel": stats, "integrity": integrity, "vendor": None}


def _run(real_s: float, claimed_s: float, pause_s: float = 0.0):
    """Run the stand-in child; with pause_s, hold this interpreter's lock for that long from 0.15 s after the
    go-ahead (ctypes.PyDLL calls keep the lock: no other thread of the parent runs meanwhile)."""
    argv = [sys.executable, "-c", CHILD, str(real_s), str(claimed_s), json.dumps(_timing())]
    with Child(argv) as child:
        runner = threading.Thread(target=child.run, args=(30.0,))
        runner.start()
        if pause_s:
            time.sleep(0.15)
            ctypes.PyDLL(None).usleep(int(pause_s * 1e6))
        runner.join()
        return child.outcome


def _verdict(outcome) -> Verdict:
    return classify(PROBLEM, outcome, Verdict(Status.COMPILED, "fp8_gemm", "cuda"))


def _arrival(outcome, event: str) -> float:
    return next(t for m, t in zip(outcome.messages, outcome.arrivals, strict=True) if m["event"] == event)


def test_a_pause_of_the_parent_does_not_make_an_honest_child_suspicious():
    outcome = _run(real_s=0.3, claimed_s=0.3, pause_s=1.5)
    # Both messages were written during the pause and read together after it (the situation of the issue).
    assert abs(_arrival(outcome, "timing") - _arrival(outcome, "shape")) < 0.15  # sent 0.3 s apart
    verdict = _verdict(outcome)
    assert verdict.status == Status.OK, verdict.message
    # Taken as sending times, the arrivals alone accuse the honest child: the rule before issue 30.
    outcome.sent_after = []
    before = _verdict(outcome)
    assert before.status == Status.SUSPICIOUS and "the parent's 0.0 ms" in before.message


def test_a_child_whose_clock_runs_slow_is_still_caught():
    verdict = _verdict(_run(real_s=0.3, claimed_s=0.1))
    assert verdict.status == Status.SUSPICIOUS
    assert "the child's clock says the shape took 100.0 ms, the parent's " in verdict.message
    # Whether the parent kept up (an interval a few milliseconds wide) or fell behind on a loaded machine (CI's two
    # busy cores did), the child's 100 ms lie about 300 ms is caught.


def test_an_honest_child_without_a_pause_is_ok_and_its_sending_times_are_tight():
    outcome = _run(real_s=0.3, claimed_s=0.3)
    assert _verdict(outcome).status == Status.OK
    widths = [late - early for early, late in zip(outcome.sent_after, outcome.arrivals, strict=True)]
    # Each sending interval is one poll (5 ms) wide while the parent keeps up; a loaded machine (CI's two cores) can
    # add scheduling delay, so the bound is the one the clock rule needs: narrower than the 200 ms lie that
    # test_a_child_whose_clock_runs_slow_is_still_caught must tell from the truth.
    assert len(widths) == len(outcome.messages) == 5 and max(widths[2:]) < 0.2
