"""Overlapping generations without Prefect: horizons and the proposal board.

The order in which candidates wait for a GPU is tested in tests/test_devices.py."""

from __future__ import annotations

import threading

import pytest

from ksci.proposers.overlap import GenerationFailed, ProposalBoard, board_of, horizon, open_board
from ksci.proposers.space import Proposal


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
