"""Overlapping generations without Prefect: horizons, the proposal board, and the GPU waiting order."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace

import httpx
import pytest

import tasks.gpu
from flows.pipeline import GenerationFailed, ProposalBoard, board_of, horizon, open_board
from ksci.proposers.tuning import Proposal
from tasks.gpu import GPU_PRIORITY, _BusyRetried, _Queue, _take_one, any_free_gpu


def test_a_generation_learns_from_those_it_does_not_overlap_and_the_first_ones_seed_the_run():
    assert [horizon(g, 0) for g in range(5)] == [0, 1, 2, 3, 4]
    assert [horizon(g, 1) for g in range(5)] == [0, 0, 1, 2, 3]
    assert [horizon(g, 2) for g in range(6)] == [0, 0, 0, 1, 2, 3]
    with pytest.raises(ValueError, match="expected 0 or more"):
        horizon(3, -1)


def test_the_board_hands_proposals_on_and_waits_for_them():
    board = ProposalBoard()
    proposal = Proposal("naive", {"BLOCK_X": 16}, None, None, "why")
    got = []
    reader = threading.Thread(target=lambda: got.append(board.proposals(4)))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # generation 4 has not proposed yet
    board.post(4, [proposal])
    reader.join(5)
    assert got == [[proposal]]
    board.post(4, [])  # a second post (a failure after proposing) changes nothing
    assert board.proposals(4) == [proposal]


def test_a_generation_that_failed_before_proposing_fails_the_ones_waiting_on_it():
    board = ProposalBoard()
    board.post(2, RuntimeError("the GPU went away"))
    with pytest.raises(GenerationFailed, match="generation 2 failed before proposing: the GPU went away"):
        board.proposals(2)


def test_boards_belong_to_one_evolve_run_at_a_time():
    with pytest.raises(RuntimeError, match="run it through the evolve flow"):
        board_of("store", "lonely")
    with open_board("store", "run") as board:
        assert board_of("store", "run") is board
        with pytest.raises(RuntimeError, match="already being evolved"), open_board("store", "run"):
            pass
    with pytest.raises(RuntimeError):
        board_of("store", "run")


def test_older_generations_ask_for_a_gpu_first():
    queue = _Queue()

    def ticket(generation: int):
        token = GPU_PRIORITY.set(generation)
        try:
            return queue.join()
        finally:
            GPU_PRIORITY.reset(token)

    newer, older, oldest = ticket(3), ticket(2), ticket(1)
    assert queue.may_ask(oldest, 1) and not queue.may_ask(older, 1) and not queue.may_ask(newer, 1)
    assert queue.may_ask(older, 2) and not queue.may_ask(newer, 2)  # two GPUs: the two oldest ask
    queue.leave(oldest)
    assert queue.may_ask(older, 1) and queue.may_ask(newer, 2)
    same = ticket(2)
    assert queue.may_ask(older, 1) and not queue.may_ask(same, 1)  # within a generation, first come first served


def test_a_slot_request_held_up_on_one_gpu_does_not_hold_up_the_others(monkeypatch):
    """A slot request can be slow (an API that answers 503 for longer than _BusyRetried asks again is asked
    again by Prefect's client, after 2 s, 4 s, ...); meanwhile this process's other waiters take the other free
    GPUs (they skip the GPU being asked for instead of queueing behind it)."""
    asked, answer = threading.Event(), threading.Event()

    @contextmanager
    def hold_slot(gpu):
        if gpu == "stall-a":
            asked.set()
            assert answer.wait(30)  # the API's late answer
        yield

    free = SimpleNamespace(active_slots=0, limit=1)
    client = SimpleNamespace(read_global_concurrency_limit_by_name=lambda name: free)
    monkeypatch.setattr(tasks.gpu, "hold_slot", hold_slot)
    monkeypatch.setattr(tasks.gpu, "get_client", lambda sync_client: nullcontext(client))
    first: list = []
    stuck = threading.Thread(target=lambda: first.append(_take_one(["stall-a", "stall-b"])), daemon=True)
    stuck.start()
    assert asked.wait(30)
    second = _take_one(["stall-a", "stall-b"])  # while the first still waits for GPU a's answer
    assert second is not None and second[0] == "stall-b" and not first
    answer.set()
    stuck.join(30)
    assert first and first[0] is not None and first[0][0] == "stall-a"


def test_a_busy_api_is_asked_again_at_once_and_after_so_many_times_prefects_client_takes_over(monkeypatch):
    """_BusyRetried, under the slot requests: a 503 (the API's SQLite busy) is asked again by the transport, not
    handed to Prefect's client (whose next try comes 2 s later); one that stays busy is handed over."""
    monkeypatch.setattr(tasks.gpu, "BUSY_RETRY_S", 0.0)
    answers: list[int] = []

    def api(busy_times: int):
        def answer(request: httpx.Request) -> httpx.Response:
            assert request.content == b'{"names":["gpu-0"]}'  # the same body each time
            answers.append(503 if len(answers) < busy_times else 200)
            return httpx.Response(answers[-1])

        return httpx.Client(transport=_BusyRetried(httpx.MockTransport(answer)), base_url="http://api")

    with api(busy_times=2) as client:
        assert client.post("/increment", json={"names": ["gpu-0"]}).status_code == 200
    assert answers == [503, 503, 200]
    answers.clear()
    with api(busy_times=1000) as client:
        assert client.post("/increment", json={"names": ["gpu-0"]}).status_code == 503
    assert len(answers) == tasks.gpu.BUSY_RETRIES + 1


def test_a_waiter_is_told_its_turn_is_near_once_few_are_ahead_and_not_before(monkeypatch):
    """on_turn, where a candidate takes its harness process, comes once per waiter while the GPU is still busy,
    when fewer than START_AHEAD waiters per GPU are ahead of it (here one GPU)."""
    ahead = tasks.gpu.START_AHEAD
    limit = SimpleNamespace(active_slots=0, limit=1)

    @contextmanager
    def hold_slot(gpu):
        limit.active_slots += 1  # only asked for when free, one request at a time per GPU (_take_free)
        try:
            yield
        finally:
            limit.active_slots -= 1

    monkeypatch.setattr(tasks.gpu, "hold_slot", hold_slot)
    monkeypatch.setattr(
        tasks.gpu,
        "get_client",
        lambda sync_client: nullcontext(SimpleNamespace(read_global_concurrency_limit_by_name=lambda name: limit)),
    )
    count = ahead + 2
    turns, holding, release = [], [threading.Event() for _ in range(count)], [threading.Event() for _ in range(count)]

    def candidate(i: int) -> None:
        with any_free_gpu(["turn-a"], on_turn=lambda: turns.append(i)):
            holding[i].set()
            assert release[i].wait(30)

    threads = [threading.Thread(target=candidate, args=(i,), daemon=True) for i in range(count)]
    threads[0].start()
    assert holding[0].wait(30)
    for i in range(1, ahead + 1):  # in this order: the queue is first come, first served within a generation
        threads[i].start()
        _until(lambda i=i: turns == list(range(i + 1)))  # fewer than START_AHEAD ahead: told at once
    threads[-1].start()
    time.sleep(0.5)  # several polls
    assert turns == list(range(ahead + 1)) and not holding[1].is_set()  # the last has START_AHEAD ahead: not yet
    release[0].set()
    assert holding[1].wait(30)
    _until(lambda: turns == list(range(count)))
    for i in range(1, count):
        release[i].set()
    for thread in threads:
        thread.join(30)
    assert all(h.is_set() for h in holding) and limit.active_slots == 0


def test_a_gpu_let_go_by_this_process_is_taken_by_its_next_waiter_without_waiting_for_the_poll(monkeypatch):
    """A waiter of this process looks again as soon as another candidate of the process lets a GPU go (the poll,
    made 60 s here, is only for GPUs that others free)."""
    limit = SimpleNamespace(active_slots=0, limit=1)

    @contextmanager
    def hold_slot(gpu):
        limit.active_slots += 1
        try:
            yield
        finally:
            limit.active_slots -= 1

    monkeypatch.setattr(tasks.gpu, "POLL_S", 60.0)
    monkeypatch.setattr(tasks.gpu, "hold_slot", hold_slot)
    monkeypatch.setattr(
        tasks.gpu,
        "get_client",
        lambda sync_client: nullcontext(SimpleNamespace(read_global_concurrency_limit_by_name=lambda name: limit)),
    )
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


def _until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def every_slot_taken(monkeypatch):
    """A Prefect API (stand-in) whose GPU limits all show their one slot taken; nothing watched before."""
    taken = SimpleNamespace(active_slots=1, limit=1)
    client = SimpleNamespace(read_global_concurrency_limit_by_name=lambda name: taken)
    monkeypatch.setattr(tasks.gpu, "get_client", lambda sync_client: nullcontext(client))
    monkeypatch.setattr(tasks.gpu, "_TAKEN", {})


@pytest.mark.usefixtures("every_slot_taken")
def test_a_slot_taken_by_others_for_too_long_gets_one_warning_with_the_way_out(monkeypatch, caplog):
    """A slot can be left taken for good (a Prefect server restarted with its leases in memory); the wait cannot
    tell that from another run's use, so after STUCK_HINT_S it says how to check and free it, once."""
    monkeypatch.setattr(tasks.gpu, "STUCK_HINT_S", 0.2)
    with caplog.at_level("WARNING", logger="tasks.gpu"):
        assert _take_one(["stuck-a"]) is None
        assert _take_one(["stuck-a"]) is None and not caplog.records  # taken, but not for long yet
        time.sleep(0.25)
        assert _take_one(["stuck-a"]) is None and _take_one(["stuck-a"]) is None
    warnings = [r.getMessage() for r in caplog.records]
    name = tasks.gpu.gpu_limit_name("stuck-a")
    assert len(warnings) == 1, warnings  # once, not at every look
    assert f"its slot {name} has been taken for" in warnings[0]
    assert f"prefect gcl update {name} --active-slots 0" in warnings[0]


@pytest.mark.usefixtures("every_slot_taken")
def test_a_slot_this_process_holds_is_not_reported_as_stuck(monkeypatch, caplog):
    monkeypatch.setattr(tasks.gpu, "STUCK_HINT_S", 0.0)
    monkeypatch.setattr(tasks.gpu, "_HELD", {"mine-a"})
    with caplog.at_level("WARNING", logger="tasks.gpu"):
        assert _take_one(["mine-a"]) is None and _take_one(["mine-a"]) is None
    assert not caplog.records


@pytest.mark.usefixtures("every_slot_taken")
def test_a_slot_not_watched_all_along_is_not_reported_as_stuck(monkeypatch, caplog):
    """Seen taken twice with a long gap between the looks: it may have been free (and taken again) in between."""
    monkeypatch.setattr(tasks.gpu, "STUCK_HINT_S", 0.2)
    monkeypatch.setattr(tasks.gpu, "WATCH_GAP_S", 0.1)
    with caplog.at_level("WARNING", logger="tasks.gpu"):
        assert _take_one(["gap-a"]) is None
        time.sleep(0.25)
        assert _take_one(["gap-a"]) is None
    assert not caplog.records
