import torch

from ksci.evaluate.harness.check import compare, same_bytes


def test_within_tolerance_passes_and_reports_the_error():
    ref = torch.linspace(-4, 4, 1000).reshape(10, 100)
    result = compare(ref * (1 + 1e-3), ref, rtol=2e-2, atol=1e-3)
    assert result["ok"] and result["mismatches"] == 0 and 0 < result["max_abs_error"] < 5e-3


def test_mismatch_report_names_the_worst_elements():
    ref = torch.ones(64, 32)
    out = ref.clone()
    out[3, 7] = 2.0
    out[60, 1] = 1.5
    result = compare(out, ref, rtol=2e-2, atol=1e-3)
    assert not result["ok"] and result["mismatches"] == 2
    lines = result["report"].splitlines()
    assert lines[0].startswith("2 of 2048 elements")
    assert "(3, 7): 2 vs 1" in result["report"] and "(60, 1): 1.5 vs 1" in result["report"]
    assert result["report"].index("(3, 7)") < result["report"].index("(60, 1)")  # worst first
    assert "failing rows: 2 of 64, first 3, last 60" in result["report"]


def test_nan_and_inf_never_pass():
    ref = torch.zeros(8, 8)
    for bad in (float("nan"), float("inf")):
        out = ref.clone()
        out[2, 2] = bad
        result = compare(out, ref, rtol=1.0, atol=1e9)  # even an absurd tolerance
        assert not result["ok"] and result["nan_or_inf"] == 1 and "NaN/inf" in result["report"]


def test_bf16_outputs_compare_in_float32():
    ref = torch.randn(128, 128, generator=torch.Generator().manual_seed(0))
    assert compare(ref.to(torch.bfloat16), ref, rtol=2e-2, atol=1e-3)["ok"]


def test_same_bytes_is_bitwise_and_nan_safe():
    a = torch.tensor([1.0, float("nan")])
    assert same_bytes(a, a.clone())
    assert not same_bytes(a, torch.tensor([1.0, 2.0]))
    fp8 = torch.randn(4, 8).to(torch.float8_e4m3fn)
    assert same_bytes(fp8.T, fp8.T.clone())
    column = torch.randn(1, 64).T  # shape (64, 1), stride (1, 64): "contiguous", yet view() rejects it
    assert same_bytes(column, column.clone())


def test_extra_profiles_are_checked_again_after_timing_on_shapes_that_cover_each_dimension():
    from ksci.evaluate.harness.plan import recheck_shapes
    from ksci.evaluate.judge.classify import expected_reports
    from ksci.evaluate.options import EvaluationOptions
    from ksci.problem.spec import load_problem

    problem = load_problem("fp8_gemm")
    chosen = [(s["m"], s["n"], s["k"]) for s in recheck_shapes(problem.tests)]
    # smallest and largest M, N, K, and the least aligned between (M 96, N 576, K 2304: partial tiles, split-K)
    assert chosen == [
        (64, 64, 128),
        (64, 1536, 7168),
        (64, 576, 7168),
        (96, 7168, 256),
        (128, 7168, 2304),
        (512, 4096, 512),
    ]
    expect = expected_reports(problem, EvaluationOptions())
    before, after = 11 * (2 + 3), 11 * 2 + 6 * 3
    assert expect["checks"] == before + 3 * len(problem.benchmarks) + after
