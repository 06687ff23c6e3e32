"""Per-target tolerances: the absolute term that scales with the output's RMS (Hopper's FP8 tensor cores)."""

from __future__ import annotations

import pytest
import torch

from ksci.evaluate.harness.check import compare
from ksci.problem.spec import ProblemError, _tolerances_by_target, load_problem


def test_cuda_adds_an_rms_relative_term_and_rocm_keeps_the_challenges():
    problem = load_problem("fp8_gemm")
    rocm = problem.tolerance("rocm")
    assert (rocm.rtol, rocm.atol, rocm.atol_rms) == (problem.rtol, problem.atol, 0.0) == (2e-2, 1e-3, 0.0)
    assert problem.tolerance("cuda").atol_rms == pytest.approx(1e-2)
    assert load_problem("rmsnorm").tolerance("cuda").atol_rms == 0.0


def test_an_rms_term_passes_rounding_of_a_cancelled_element_and_still_fails_a_wrong_one():
    ref = torch.full((64, 64), 80.0)
    ref[0, 0] = 0.01  # an output left small by cancellation
    rounded = ref.clone()
    rounded[0, 0] = 0.05  # off by 0.04: 5e-4 of the RMS, far over 1e-3 + 2e-2 * 0.01
    assert not compare(rounded, ref, 2e-2, 1e-3)["ok"]
    assert compare(rounded, ref, 2e-2, 1e-3, atol_rms=1e-2)["ok"]
    wrong = ref.clone()
    wrong[5, 7] = 70.0  # off by 10: an eighth of the RMS
    assert not compare(wrong, ref, 2e-2, 1e-3, atol_rms=1e-2)["ok"]
    nan = ref.clone()
    nan[1, 1] = float("nan")
    assert not compare(nan, ref, 2e-2, 1e-3, atol_rms=1e-2)["ok"]


def test_an_unknown_target_or_key_is_refused():
    with pytest.raises(ProblemError, match="tolerance_by_target.cdna"):
        _tolerances_by_target({"cdna": {"atol_rms": 1e-2}}, "p")
    with pytest.raises(ProblemError, match="tolerance_by_target.cuda"):
        _tolerances_by_target({"cuda": {"atol_max": 1e-2}}, "p")
