"""Overlapping generations: which generations one learns from, and the proposals it must not repeat.

With `overlap` k, generation g learns from the generations before its horizon max(0, g - k): it is proposed,
compiled and queued for a GPU while the k generations before it are still being timed, so that no GPU waits for a
generation's compiles or for its slowest candidate. The rule holds from the start: generations 1 to k learn from
no results and seed the run as generation 0 does (with the tuning proposer: each family's default and Optuna's
random start-up points, which TPE draws anyway until a family has results), so that generation 0's last
candidates are not timed on one GPU while the others wait. The generations it overlaps hand it their proposals
through a board, so that it never proposes a point they are already evaluating; the proposals, and with them every
cache key, stay a deterministic function of the generations before, so a rerun replays from Prefect's cache as
without overlap. The evolve flow opens a run's board (open_board) and runs the generations in threads of its
process; the tuning proposer (ksci.proposers.tuning_proposer) reads and posts; which run may overlap: ksci.run.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from ksci.proposers.space import Proposal


def horizon(generation: int, overlap: int) -> int:
    """Generation `generation` learns from the generations before this one."""
    if overlap < 0:
        raise ValueError(f"overlap {overlap}: expected 0 or more")
    return max(0, generation - overlap)


class GenerationFailed(RuntimeError):
    """A generation this one overlaps failed before it had proposals to hand on."""


class ProposalBoard:
    """The proposals of one run's generations, posted by each generation flow as soon as it has them."""

    def __init__(self) -> None:
        self._posted: dict[int, list[Proposal] | BaseException] = {}
        self._changed = threading.Condition()

    def post(self, generation: int, proposals: list[Proposal] | BaseException) -> None:
        with self._changed:
            self._posted.setdefault(generation, proposals)
            self._changed.notify_all()

    def proposals(self, generation: int) -> list[Proposal]:
        """The proposals of `generation`, waiting until it has posted them."""
        with self._changed:
            self._changed.wait_for(lambda: generation in self._posted)
            posted = self._posted[generation]
        if isinstance(posted, BaseException):
            raise GenerationFailed(f"generation {generation} failed before proposing: {posted}") from posted
        return posted


_BOARDS: dict[tuple[str, str], ProposalBoard] = {}
_BOARDS_LOCK = threading.Lock()


@contextmanager
def open_board(store_root: str, run: str):
    """The board of one evolve flow run, for its generations to find (they run in this process)."""
    board = ProposalBoard()
    with _BOARDS_LOCK:
        if (store_root, run) in _BOARDS:
            raise RuntimeError(f"run {run} is already being evolved in this process")
        _BOARDS[(store_root, run)] = board
    try:
        yield board
    finally:
        with _BOARDS_LOCK:
            del _BOARDS[(store_root, run)]


def board_of(store_root: str, run: str) -> ProposalBoard:
    with _BOARDS_LOCK:
        board = _BOARDS.get((store_root, run))
    if board is None:
        raise RuntimeError(
            f"run {run}: a generation that overlaps earlier ones needs their proposals; run it through the evolve "
            "flow (ksci evolve --overlap), which runs the generations side by side"
        )
    return board


def in_flight(store_root: str, run: str, generation: int, overlap: int) -> list[Proposal]:
    """The proposals of the generations that `generation` overlaps, waiting until each has posted them (none
    without overlap)."""
    if not overlap:
        return []
    board = board_of(store_root, run)
    return [p for earlier in range(horizon(generation, overlap), generation) for p in board.proposals(earlier)]


def post(store_root: str, run: str, generation: int, proposals: list[Proposal] | BaseException) -> None:
    """Hand this generation's proposals (or the error that stopped it before it had any) to the ones after it."""
    board_of(store_root, run).post(generation, proposals)
