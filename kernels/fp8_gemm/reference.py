"""Reference, inputs and vendor baseline for the block-scaled FP8 GEMM.

Plain functions that the one harness (ksci/evaluate/harness) calls; no harness logic lives here.
All tensors follow the layouts in problem.yaml: A, B and the scales column-major, C row-major.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

BLOCK = 128  # scale block edge along K (A and B) and along N (B)


def fp8_dtype(target: str) -> torch.dtype:
    """MI300 (ROCm) uses the FNUZ variant of e4m3; Hopper (CUDA) the OCP one."""
    return torch.float8_e4m3fnuz if target == "rocm" else torch.float8_e4m3fn


def generate_input(shape: dict, seed: int, target: str, device: str | torch.device) -> dict:
    """bf16 Gaussian values cast to FP8, drawn K-major and transposed, so that A and B are column-major."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    dt = fp8_dtype(target)
    a = torch.randn((k, m), dtype=torch.bfloat16, device=device, generator=gen).to(dt)
    b = torch.randn((k, n), dtype=torch.bfloat16, device=device, generator=gen).to(dt)
    scale_k, scale_n = k // BLOCK, -(-n // BLOCK)
    a_scale = torch.randn((scale_k, m), dtype=torch.float32, device=device, generator=gen)
    b_scale = torch.randn((scale_k, scale_n), dtype=torch.float32, device=device, generator=gen)
    c = torch.empty((m, n), dtype=torch.bfloat16, device=device)
    return {"a": a.T, "b": b.T, "a_scale": a_scale.T, "b_scale": b_scale.T, "c": c}


def reference(inputs: dict) -> dict:
    """Dequantise both operands in float32 and multiply (no TF32), as the task defines it."""
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    a_scale = inputs["a_scale"].repeat_interleave(BLOCK, dim=1)[:, :k]
    b_scale = inputs["b_scale"].repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    a32 = a.to(torch.float32) * a_scale
    b32 = b.to(torch.float32) * b_scale
    return {"c": (a32 @ b32.T).to(torch.bfloat16)}


def vendor(inputs: dict) -> Callable[[], dict] | None:
    """cuBLASLt (CUDA) or hipBLASLt (ROCm) block-scaled FP8 GEMM through torch._scaled_mm.

    Layouts that cuBLASLt accepts (torch 2.11, CUDA 13, checked on an H200): A row-major (K contiguous), B.T
    column-major, scale_a (M, K/128) M-major, scale_b (K/128, N/128) with strides (1, K/128). With K/128 not a
    multiple of 4 it returned wrong results and refused padded scale strides, so there K is padded with zeros
    to the next multiple of 512 (K = 256 and 2304 here: the library then does up to twice the work on K = 256).
    All of this preparation happens once, outside the timed call. None where torch has no block-scaled path.
    """
    if not hasattr(torch, "_scaled_mm") or inputs["a"].device.type != "cuda":
        return None
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    kb, nb = k // BLOCK, -(-n // BLOCK)
    kb_pad = -(-kb // 4) * 4
    a_k = torch.zeros((m, kb_pad * BLOCK), dtype=a.dtype, device=a.device)
    a_k[:, :k] = a
    b_k = torch.zeros((n, kb_pad * BLOCK), dtype=b.dtype, device=b.device)
    b_k[:, :k] = b
    scale_a = torch.zeros((kb_pad, m), dtype=torch.float32, device=a.device).T  # (M, K/128), M-major
    scale_a[:, :kb] = inputs["a_scale"]
    scale_b = torch.zeros((nb, kb_pad), dtype=torch.float32, device=a.device).T  # (K/128, N/128), K-major
    scale_b[:kb, :] = inputs["b_scale"].T

    def run() -> dict:
        return {"c": torch._scaled_mm(a_k, b_k.T, scale_a, scale_b, out_dtype=torch.bfloat16)}

    return run


def flops(shape: dict) -> float:
    return 2.0 * shape["m"] * shape["n"] * shape["k"]


def bytes_moved(shape: dict) -> float:
    """Fewest bytes through device memory: each input read once, the output written once."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    scales = 4 * (k // BLOCK) * (m + -(-n // BLOCK))
    return m * k + n * k + scales + 2 * m * n
