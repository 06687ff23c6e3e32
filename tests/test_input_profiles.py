"""The input profiles of issue 30 on the CPU: every declared profile keeps the float32 reference finite, an exact
kernel (float64 block sums) passes each problem's own checker on it, and each "right on test data, wrong on real
data" behaviour of kernels/fp8_gemm/solutions/adversarial/ (played here in torch) fails on the profile that shows
it while passing `spec`, which was the only profile before.
"""

from __future__ import annotations

import pytest
import torch

from ksci.evaluate.harness.cases import draw
from ksci.evaluate.harness.check import compare
from ksci.problem.spec import load_problem

FP8 = ("fp8_gemm", "fp8_gemm_kmajor")
SHAPES = [{"m": 64, "n": 576, "k": 512, "seed": 11}, {"m": 128, "n": 256, "k": 1024, "seed": 12}]
FP16_MAX = 65504.0
FP16_SMALLEST_NORMAL = 2.0**-14


def _gemm(t: dict, partial=None, scale=None, first_scale_division: bool = False) -> torch.Tensor:
    """C in float64, block by block along K, with the behaviours the adversarial kernels play as options:
    `partial(p)` applied to each 128-wide block's unscaled sum (fp16 accumulation), `scale(s)` to every scale
    (flushing tiny ones), `first_scale_division` for a kernel that factors each row's first A scale out of the sum."""
    a, b = t["a"].double(), t["b"].double()
    a_scale, b_scale = t["a_scale"].double(), t["b_scale"].double()
    if scale is not None:
        a_scale, b_scale = scale(a_scale), scale(b_scale)
    m, k = a.shape
    n = b.shape[0]
    out = torch.zeros(m, n, dtype=torch.float64)
    first = a_scale[:, :1]
    for kb in range(k // 128):
        block = slice(kb * 128, (kb + 1) * 128)
        p = a[:, block] @ b[:, block].T
        p = partial(p) if partial else p
        sb = b_scale[torch.arange(n) // 128, kb][None, :]
        sa = a_scale[:, kb : kb + 1] / first if first_scale_division else a_scale[:, kb : kb + 1]
        out += p * sa * sb
    return out * first if first_scale_division else out


def _fp16_accumulated(p: torch.Tensor) -> torch.Tensor:
    return torch.where(p.abs() > FP16_MAX, torch.full_like(p, float("inf")) * p.sign(), p)


def _flushed(s: torch.Tensor) -> torch.Tensor:
    return torch.where(s.abs() < FP16_SMALLEST_NORMAL, torch.zeros_like(s), s)


def _check(problem, out: torch.Tensor, ref: torch.Tensor, inputs: dict | None = None) -> dict:
    """The problem's CUDA check, with the acc_rtol term where the inputs are given (as the harness does)."""
    tol = problem.tolerance("cuda")
    mag = problem.reference_module().magnitude(inputs)["c"] if inputs is not None else None
    return compare(out.to(torch.bfloat16), ref, tol.rtol, tol.atol, tol.atol_rms, tol.acc_rtol, mag)


@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("profile", ["spec", "full_range", "outliers", "zeros"])
def test_an_exact_fp8_gemm_passes_on_every_profile(name, profile):
    problem = load_problem(name)
    assert profile in problem.inputs
    ref = problem.reference_module()
    for shape in SHAPES:
        t = draw(ref, shape, shape["seed"], "cuda", "cpu", profile)
        expected = ref.reference(t)["c"]
        assert torch.isfinite(expected.float()).all()
        result = _check(problem, _gemm(t), expected, t)
        assert result["ok"], result["report"]


def test_the_quantised_profiles_use_the_whole_fp8_range_and_keep_the_layouts():
    ref = load_problem("fp8_gemm").reference_module()
    shape = {"m": 64, "n": 576, "k": 256}
    for profile in ("full_range", "outliers", "zeros"):
        t = ref.generate_input(shape, 3, "cuda", "cpu", profile=profile)
        assert t["a"].stride() == (1, 64) and t["b"].stride() == (1, 576)
        assert t["a_scale"].shape == (64, 2) and t["a_scale"].stride() == (1, 64)
        assert t["b_scale"].shape == (5, 2) and t["b_scale"].stride() == (1, 5)
        assert float(t["a"].float().abs().max()) == 448.0 and float(t["b"].float().abs().max()) == 448.0
        assert bool((t["a_scale"] >= 0).all())  # real quantisers' scales: amax / 448
    rocm = ref.generate_input(shape, 3, "rocm", "cpu", profile="full_range")
    assert float(rocm["a"].float().abs().max()) == 240.0  # e4m3fnuz's maximum
    zeros = ref.generate_input(shape, 3, "cuda", "cpu", profile="zeros")
    assert bool((zeros["a_scale"][:, 0] == 0).any())  # rows whose first block is all zero
    spread = zeros["a_scale"][zeros["a_scale"] > 0]
    assert float(spread.max() / spread.min()) > 1e5  # scales over many decades
    kmajor = load_problem("fp8_gemm_kmajor").reference_module().generate_input(shape, 3, "cuda", "cpu", "zeros")
    assert kmajor["a"].is_contiguous() and torch.equal(kmajor["a"].float(), zeros["a"].float())
    with pytest.raises(ValueError, match="unknown input profile"):
        ref.generate_input(shape, 3, "cuda", "cpu", profile="made_up")


def test_spec_inputs_are_those_of_before():
    """`spec` draws exactly what generate_input drew before profiles existed (the timed inputs stay comparable)."""
    ref = load_problem("fp8_gemm").reference_module()
    shape = {"m": 64, "n": 128, "k": 256}
    t = ref.generate_input(shape, 5, "cuda", "cpu")
    gen = torch.Generator().manual_seed(5)
    a = torch.randn((256, 64), dtype=torch.bfloat16, generator=gen).to(torch.float8_e4m3fn)
    assert torch.equal(t["a"].float(), a.T.float())


ADVERSARIAL = [
    # (behaviour, the profiles it must fail on, keyword arguments of _gemm)
    ("fp16_accumulation", {"full_range", "outliers", "zeros"}, {"partial": _fp16_accumulated}),
    ("flush_tiny_scales", {"zeros"}, {"scale": _flushed}),
    ("divide_by_first_scale", {"zeros"}, {"first_scale_division": True}),
]


@pytest.mark.parametrize(("behaviour", "fails_on", "kwargs"), ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_each_adversarial_behaviour_passes_spec_and_fails_its_profile(behaviour, fails_on, kwargs):
    problem = load_problem("fp8_gemm")
    ref = problem.reference_module()
    shape = dict(problem.tests[2])  # 64x3072x1536
    verdicts = {}
    for profile in problem.inputs:
        t = draw(ref, shape, shape["seed"], "cuda", "cpu", profile)
        verdicts[profile] = _check(problem, _gemm(t, **kwargs), ref.reference(t)["c"], t)["ok"]
    assert verdicts["spec"], f"{behaviour} must be right on the challenge's inputs"
    assert {p for p, ok in verdicts.items() if not ok} >= fails_on, verdicts


RMSNORM_BREAKS = {
    "no_eps": lambda x: x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True)),
    "fp16_sum_of_squares": lambda x: (
        x * torch.rsqrt(x.square().sum(dim=-1, keepdim=True).clamp(max=FP16_MAX) / x.shape[-1] + 1e-6)
    ),
}


@pytest.mark.parametrize("profile", ["spec", "wide_range", "near_zero"])
def test_rmsnorm_profiles_keep_the_reference_finite_and_pass_an_exact_kernel(profile):
    problem = load_problem("rmsnorm")
    assert profile in problem.inputs
    ref = problem.reference_module()
    for shape in problem.tests[12:15]:
        t = draw(ref, shape, shape["seed"], "cuda", "cpu", profile)
        expected = ref.reference(t)["out"]
        assert torch.isfinite(expected.float()).all()
        x, w = t["x"].double(), t["weight"].double()
        exact = x / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + 1e-6) * w
        result = compare(exact.to(torch.bfloat16), expected, problem.rtol, problem.atol)
        assert result["ok"], result["report"]


@pytest.mark.parametrize(("name", "fails_on"), [("no_eps", "near_zero"), ("fp16_sum_of_squares", "wide_range")])
def test_rmsnorm_breaks_show_on_their_profile(name, fails_on):
    problem = load_problem("rmsnorm")
    ref = problem.reference_module()
    shape = dict(problem.tests[13])
    t = draw(ref, shape, shape["seed"], "cuda", "cpu", fails_on)
    x = t["x"].double()
    out = (RMSNORM_BREAKS[name](x) * t["weight"].double()).to(torch.bfloat16)
    assert not compare(out, ref.reference(t)["out"], problem.rtol, problem.atol)["ok"]
