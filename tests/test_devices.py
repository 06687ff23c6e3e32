"""ksci.devices, the GPUs of this host as lock files: exclusion across processes, a dead holder's GPU freed by the
OS, the waiting order within a process and the early turn (on_turn). Plain Python, no Prefect, no GPU: the GPU
ids are names of lock files only."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import ksci.devices
from ksci.devices import GPU_PRIORITY, START_AHEAD, _Queue, any_free_gpu, lock_dir, lock_path

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def locks(tmp_path, monkeypatch) -> Path:
    """A lock folder of this test's own, so that nothing else on the machine contends for its GPUs."""
    folder = tmp_path / "locks"
    monkeypatch.setenv(ksci.devices.LOCK_DIR_ENV, str(folder))
    return folder


def _child(script: str, locks: Path, **popen) -> subprocess.Popen:
    """A Python child that shares this test's lock folder and imports ksci from the checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{ksci.devices.LOCK_DIR_ENV: str(locks)})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env, text=True, **popen)


def _until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_processes_contending_for_two_gpus_never_share_one_and_use_both(locks):
    """Three processes, each taking a GPU of two eight times and holding it a moment: per GPU, no two holding
    intervals overlap (time.monotonic is one clock for every process of a Linux host)."""
    script = """
        import json, time
        from ksci.devices import any_free_gpu
        for _ in range(8):
            with any_free_gpu(["x-0", "x-1"]) as gpu:
                start = time.monotonic()
                time.sleep(0.03)
                print(json.dumps([gpu, start, time.monotonic()]), flush=True)
    """
    children = [_child(script, locks, stdout=subprocess.PIPE) for _ in range(3)]
    windows: dict[str, list[tuple[float, float]]] = {}
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        for gpu, start, end in map(json.loads, out.splitlines()):
            windows.setdefault(gpu, []).append((start, end))
    assert sorted(windows) == ["x-0", "x-1"] and sum(map(len, windows.values())) == 24
    for gpu, spans in windows.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert end <= start, f"two candidates on GPU {gpu} at once: {spans}"


def test_a_killed_holder_leaves_its_gpu_free(locks):
    """SIGKILL to a process that holds a GPU (no clean-up runs): the OS drops its lock, and a waiter here takes
    the GPU at its next try. The holder's own child, started while it held the GPU, outlives it and does not keep
    the lock (the descriptor is closed at the child's exec)."""
    holder = _child(
        """
        import subprocess, sys, time
        from ksci.devices import any_free_gpu
        with any_free_gpu(["k-0"]):
            grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            print(grandchild.pid, flush=True)
            time.sleep(120)
        """,
        locks,
        stdout=subprocess.PIPE,
    )
    grandchild = int(holder.stdout.readline())
    taken = threading.Event()

    def waiter() -> None:
        with any_free_gpu(["k-0"]):
            taken.set()

    thread = threading.Thread(target=waiter, daemon=True)
    try:
        thread.start()
        assert not taken.wait(0.5)  # held by the other process
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        assert taken.wait(10), "the GPU of a killed holder was not taken"
        thread.join(10)
    finally:
        os.kill(grandchild, signal.SIGKILL)
        holder.kill()
        holder.wait()


def test_older_generations_try_for_a_gpu_first():
    queue = _Queue()

    def ticket(generation: int):
        token = GPU_PRIORITY.set(generation)
        try:
            return queue.join()
        finally:
            GPU_PRIORITY.reset(token)

    newer, older, oldest = ticket(3), ticket(2), ticket(1)
    assert [queue.ahead_of(t) for t in (oldest, older, newer)] == [0, 1, 2]
    queue.leave(oldest)
    assert queue.ahead_of(older) == 0 and queue.ahead_of(newer) == 1
    same = ticket(2)
    # Within a generation, first come first served; any older generation, whenever it came, before a newer one.
    assert queue.ahead_of(same) == 1 and queue.ahead_of(newer) == 2


def test_waiters_of_a_process_take_a_freed_gpu_in_priority_order():
    """One GPU, held; waiters of generations 3, 1, 2 arrive in that order; they get it oldest generation first."""
    order, release, arrived = [], threading.Event(), threading.Event()

    def holder() -> None:
        with any_free_gpu(["p-0"]):
            arrived.set()
            assert release.wait(30)

    def waiter(generation: int) -> None:
        GPU_PRIORITY.set(generation)  # a thread's own context
        with any_free_gpu(["p-0"]):
            order.append(generation)

    threads = [threading.Thread(target=holder, daemon=True)]
    threads[0].start()
    assert arrived.wait(30)
    queue = ksci.devices._queue_of(["p-0"])
    for generation in (3, 1, 2):
        threads.append(threading.Thread(target=waiter, args=(generation,), daemon=True))
        threads[-1].start()
        _until(lambda: len(queue._waiting) == len(threads) - 1)
    release.set()
    for thread in threads:
        thread.join(30)
    assert order == [1, 2, 3]


def test_a_waiter_is_told_its_turn_is_near_once_few_are_ahead_and_not_before():
    """on_turn, where a candidate takes its harness process, comes once per waiter while the GPU is still busy,
    when fewer than START_AHEAD waiters per GPU are ahead of it (here one GPU)."""
    count = START_AHEAD + 2
    turns, holding, release = [], [threading.Event() for _ in range(count)], [threading.Event() for _ in range(count)]

    def candidate(i: int) -> None:
        with any_free_gpu(["turn-a"], on_turn=lambda: turns.append(i)):
            holding[i].set()
            assert release[i].wait(30)

    threads = [threading.Thread(target=candidate, args=(i,), daemon=True) for i in range(count)]
    threads[0].start()
    assert holding[0].wait(30)
    for i in range(1, START_AHEAD + 1):  # in this order: the queue is first come, first served within a generation
        threads[i].start()
        _until(lambda i=i: turns == list(range(i + 1)))  # fewer than START_AHEAD ahead: told at once
    threads[-1].start()
    time.sleep(0.5)  # several polls
    assert turns == list(range(START_AHEAD + 1)) and not holding[1].is_set()  # the last has START_AHEAD ahead
    release[0].set()
    assert holding[1].wait(30)
    _until(lambda: turns == list(range(count)))  # one ahead left the queue: the last is told, GPU still busy
    assert not holding[-1].is_set()
    for i in range(1, count):
        release[i].set()
    for thread in threads:
        thread.join(30)
    assert all(h.is_set() for h in holding)


def test_a_waiter_whose_turn_fails_leaves_the_queue():
    """on_turn raising (a harness that cannot start) ends that wait with the error, and the waiters behind it
    are not held up by a place it no longer takes."""

    def broken() -> None:
        raise RuntimeError("no harness")

    with any_free_gpu(["fail-a"]):
        with pytest.raises(RuntimeError, match="no harness"), any_free_gpu(["fail-a"], on_turn=broken):
            pass
        assert ksci.devices._queue_of(["fail-a"])._waiting == set()
    with any_free_gpu(["fail-a"]) as gpu:
        assert gpu == "fail-a"


def test_a_gpu_let_go_by_this_process_is_taken_by_its_next_waiter_without_waiting_for_the_poll(monkeypatch):
    """A waiter of this process looks again as soon as another candidate of the process lets a GPU go (the poll,
    made 60 s here, is only for GPUs that other processes free)."""
    monkeypatch.setattr(ksci.devices, "POLL_S", 60.0)
    holding, release, second = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with any_free_gpu(["freed-a"]):
            holding.set()
            assert release.wait(30)

    def waiter() -> None:
        with any_free_gpu(["freed-a"]):
            second.set()

    threads = [threading.Thread(target=first, daemon=True), threading.Thread(target=waiter, daemon=True)]
    threads[0].start()
    assert holding.wait(30)
    threads[1].start()
    time.sleep(0.3)  # the waiter has looked once, found the GPU taken, and waits
    assert not second.is_set()
    release.set()
    assert second.wait(20)  # well before its next poll, 60 s on
    for thread in threads:
        thread.join(30)


def test_two_gpus_are_held_at_once_and_a_gpu_is_free_again_after_an_error():
    with any_free_gpu(["e-0", "e-1"]) as one, any_free_gpu(["e-0", "e-1"]) as other:
        assert {one, other} == {"e-0", "e-1"}
    with pytest.raises(ValueError, match="boom"), any_free_gpu(["e-0"]):
        raise ValueError("boom")
    with any_free_gpu(["e-0"]) as gpu:
        assert gpu == "e-0"
    with pytest.raises(ValueError, match="at least one GPU"), any_free_gpu([]):
        pass


def test_the_lock_folder_is_shared_by_all_users_and_any_gpu_id_names_a_lock_of_its_own(locks):
    assert lock_dir() == locks
    assert stat.S_IMODE(locks.stat().st_mode) == 0o1777  # world-writable, sticky, whatever the umask
    assert lock_path("0").parent == locks and lock_path("0").name.endswith("-gpu-0.lock")
    odd = ["GPU-1f2e/3", "GPU-1f2e_3", "", "../0"]
    paths = {lock_path(gpu) for gpu in odd} | {lock_path("0")}
    assert len(paths) == len(odd) + 1 and all(p.parent == locks for p in paths)
    with any_free_gpu(["../0"]) as gpu:
        assert gpu == "../0" and not (locks.parent / "0").exists()
    assert stat.S_IMODE(lock_path("../0").stat().st_mode) == 0o644  # others can open it to lock it


def test_one_candidate_after_another_spreads_over_the_free_gpus(locks):
    """With every GPU free, the one this process let go longest ago (or never used) is taken: candidates that
    run one after another use all the GPUs, not only the first one named."""
    taken = []
    for _ in range(4):
        with any_free_gpu(["spread-a", "spread-b"]) as gpu:
            taken.append(gpu)
    assert taken == ["spread-a", "spread-b", "spread-a", "spread-b"]


def test_a_handed_over_gpu_is_taken_at_once_and_its_timed_run_waits_for_the_exit(locks):
    """A run hands its GPU over at its result (ksci.devices.Lease): the next candidate, in another process, takes
    the GPU while the first is still exiting, and its wait_for_exits returns only once the first let go of the exit
    lock (its process gone); without an exiting run it returns at once."""
    script = """
        import time
        from ksci.devices import any_free_gpu, current_lease
        with any_free_gpu(["h-0"]) as gpu:
            print("holding", flush=True)
            input()  # the test says when the result came
            current_lease(gpu).hand_over()
            print("handed", flush=True)
            input()  # ... and when the process has exited
        print("gone", flush=True)
    """
    first = _child(script, locks, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert first.stdout.readline().strip() == "holding"
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() == "handed"
        with any_free_gpu(["h-0"]) as gpu:  # taken although the first still runs
            lease = ksci.devices.current_lease(gpu)
            assert lease is not None and ksci.devices.current_lease("other") is None
            assert not lease.wait_for_exits(time.monotonic() + 0.3)  # the first is still exiting
            waited = []
            waiter = threading.Thread(target=lambda: waited.append(lease.wait_for_exits(time.monotonic() + 30)))
            waiter.start()
            time.sleep(0.2)
            assert not waited
            first.stdin.write("\n")
            first.stdin.flush()
            assert first.stdout.readline().strip() == "gone"
            waiter.join(30)
            assert waited == [True]
        with any_free_gpu(["h-0"]) as gpu:
            assert ksci.devices.current_lease(gpu).wait_for_exits(time.monotonic())  # nobody exiting: at once
    finally:
        first.kill()
        first.wait()
    assert ksci.devices.current_lease("h-0") is None  # outside any_free_gpu


def test_a_lease_handed_over_frees_the_gpu_for_this_process_too_and_closes_once():
    with any_free_gpu(["h-1"]) as gpu:
        lease = ksci.devices.current_lease(gpu)
        lease.hand_over()
        lease.hand_over()  # a second time: nothing more to give
        assert lease.handed_over
        with any_free_gpu(["h-1"]) as again:  # would wait forever if the GPU were still held
            assert again == gpu and ksci.devices.current_lease(again) is not lease
        assert ksci.devices.current_lease(gpu) is lease  # the outer block's again
    assert lock_path("h-1", ksci.devices.EXIT_LOCK).name.endswith("-gpu-h-1.exit.lock")
