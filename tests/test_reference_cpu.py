"""The fp8_gemm and rmsnorm references on the CPU, against independent float64 computations."""

import torch

from ksci.problem.spec import load_problem


def test_fp8_gemm_inputs_have_the_task_layouts():
    ref = load_problem("fp8_gemm").reference_module()
    shape = {"m": 64, "n": 576, "k": 256}
    t = ref.generate_input(shape, 7, "cuda", "cpu")
    assert t["a"].shape == (64, 256) and t["a"].stride() == (1, 64) and t["a"].dtype == torch.float8_e4m3fn
    assert t["b"].shape == (576, 256) and t["b"].stride() == (1, 576)
    assert t["a_scale"].shape == (64, 2) and t["a_scale"].stride() == (1, 64)
    assert t["b_scale"].shape == (5, 2) and t["b_scale"].stride() == (1, 5)  # ceil(576 / 128) = 5
    assert t["c"].shape == (64, 576) and t["c"].is_contiguous() and t["c"].dtype == torch.bfloat16
    assert ref.generate_input(shape, 7, "rocm", "cpu")["a"].dtype == torch.float8_e4m3fnuz
    again = ref.generate_input(shape, 7, "cuda", "cpu")
    assert torch.equal(t["a_scale"], again["a_scale"])  # seeded


def test_fp8_gemm_reference_matches_a_blockwise_float64_sum():
    ref = load_problem("fp8_gemm").reference_module()
    m, n, k = 64, 192, 256  # a partial second scale block along N
    t = ref.generate_input({"m": m, "n": n, "k": k}, 3, "cuda", "cpu")
    a, b = t["a"].double(), t["b"].double()
    expected = torch.zeros(m, n, dtype=torch.float64)
    for kb in range(k // 128):
        block = slice(kb * 128, (kb + 1) * 128)
        partial = a[:, block] @ b[:, block].T
        b_scale = t["b_scale"][torch.arange(n) // 128, kb].double()
        expected += partial * t["a_scale"][:, kb].double()[:, None] * b_scale[None, :]
    got = ref.reference(t)["c"].double()
    assert torch.allclose(got, expected, rtol=1e-2, atol=1e-2)
    assert ref.vendor(t) is None  # no block-scaled vendor GEMM on the CPU


def test_rmsnorm_reference_matches_float64():
    ref = load_problem("rmsnorm").reference_module()
    problem = load_problem("rmsnorm")
    shape = dict(problem.tests[0])
    t = ref.generate_input(shape, 5, "cuda", "cpu")
    x, w = t["x"].double(), t["weight"].double()
    expected = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w
    (name,) = problem.outputs
    assert torch.allclose(ref.reference(t)[name].double(), expected, rtol=1e-2, atol=1e-2)
