"""benchmarks/deepseek_fp8_layer.py on the CPU: its quantisers give the problem's layouts, and its op path pads and
splits a token count outside the op's shape contract and says so. The op here is the problem's reference computed
on the CPU (a stand-in for the exported op, whose own tests run on a GPU); nothing is timed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from ksci.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("deepseek_fp8_layer", ROOT / "benchmarks" / "deepseek_fp8_layer.py")
layer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layer)
reference = load_problem("fp8_gemm_kmajor").reference_module()
CONTRACT = {"m": {"minimum": 64, "maximum": 128, "multiple": 32}}


def _stand_in_op(a, b, a_scale, b_scale):
    """The problem's reference (dequantise, multiply in float32, store bf16), with the contract's refusal."""
    m = a.shape[0]
    rule = CONTRACT["m"]
    if not (rule["minimum"] <= m <= rule["maximum"] and m % rule["multiple"] == 0):
        raise ValueError(f"m={m} is outside the shape contract")
    return reference.reference({"a": a, "b": b, "a_scale": a_scale, "b_scale": b_scale})["c"]


def test_the_quantisers_give_the_problems_layouts_and_round_trip():
    torch.manual_seed(0)
    x = torch.randn((5, 256), dtype=torch.bfloat16)
    q, scale = layer.quantise_activations(x)
    assert q.dtype == torch.float8_e4m3fn and q.is_contiguous() and scale.shape == (5, 2) and scale.stride() == (1, 5)
    back = q.float() * scale.repeat_interleave(128, dim=1)
    assert torch.allclose(back, x.float(), rtol=0.07, atol=1e-3)
    w = torch.randn((192, 256))
    qw, sw = layer.quantise_weight(w)
    assert qw.shape == (192, 256) and sw.shape == (2, 2) and sw.stride() == (1, 2)
    assert torch.allclose(
        qw.float() * sw.repeat_interleave(128, 0)[:192].repeat_interleave(128, 1), w, rtol=0.07, atol=1e-2
    )


@pytest.mark.parametrize(("tokens", "note"), [(5, "padded to 64"), (70, "padded to 96"), (96, None), (200, "split")])
def test_the_op_path_pads_or_splits_outside_the_contract_and_says_so(tokens, note):
    torch.manual_seed(1)
    mlp_layer = layer.Fp8Linear(torch.randn((128, 256)), "op", _stand_in_op, CONTRACT)
    x = torch.randn((tokens, 256), dtype=torch.bfloat16)
    got = mlp_layer(x)
    a, a_scale = layer.quantise_activations(x)
    want = reference.reference({"a": a, "b": mlp_layer.weight, "a_scale": a_scale, "b_scale": mlp_layer.weight_scale})
    assert got.shape == (tokens, 128)
    assert torch.equal(got, want["c"])
    assert (note is None and not mlp_layer.notes) or any(note in n for n in mlp_layer.notes)
