"""Reference, inputs and vendor baseline for the block-scaled FP8 GEMM.

Plain functions that the one harness (ksci/harness) calls; no harness logic lives here.
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


def _pad_cols(t: torch.Tensor, multiple: int) -> torch.Tensor:
    """Copy t (rows x cols) into a column-major buffer whose leading dimension is a multiple of `multiple`."""
    rows, cols = t.shape
    lead = -(-rows // multiple) * multiple
    buf = torch.zeros((cols, lead), dtype=t.dtype, device=t.device)
    buf[:, :rows] = t.T
    return buf[:, :rows].T


def vendor(inputs: dict) -> Callable[[], dict] | None:
    """cuBLASLt (CUDA) or hipBLASLt (ROCm) block-scaled FP8 GEMM through torch._scaled_mm.

    Operand layout changes (A to K-major, scales padded) happen here, once, outside the timed call,
    as a library user would keep their tensors. Returns None where torch offers no block-scaled path.
    """
    if not hasattr(torch, "_scaled_mm") or inputs["a"].device.type != "cuda":
        return None
    a = inputs["a"].contiguous()  # M x K, K contiguous (row-major), as cuBLASLt wants mat1
    b = inputs["b"]  # N x K column-major; b.T is K x N with K contiguous (column-major mat2)
    n = b.shape[0]
    # cuBLASLt reads scale tensors with a leading dimension that must be a multiple of 4.
    a_scale = _pad_cols(inputs["a_scale"], 4)  # M x K/128, M-major
    b_scale = _pad_rows_k_major(inputs["b_scale"], 4)  # ceil(N/128) x K/128, K-major
    n_pad = -(-n // BLOCK) * BLOCK
    if n_pad != n:  # partial last scale block: pad B with zero rows and slice the output
        b_full = torch.zeros((n_pad, b.shape[1]), dtype=b.dtype, device=b.device)
        b_full[:n] = b
        b = b_full

    def run() -> dict:
        out = torch._scaled_mm(a, b.T, a_scale, b_scale, out_dtype=torch.bfloat16)
        return {"c": out[:, :n]}

    return run


def _pad_rows_k_major(t: torch.Tensor, multiple: int) -> torch.Tensor:
    """Copy t (rows x cols) into a row-major buffer whose row length is padded to `multiple`."""
    rows, cols = t.shape
    lead = -(-cols // multiple) * multiple
    buf = torch.zeros((rows, lead), dtype=t.dtype, device=t.device)
    buf[:, :cols] = t
    return buf[:, :cols]


def flops(shape: dict) -> float:
    return 2.0 * shape["m"] * shape["n"] * shape["k"]


def bytes_moved(shape: dict) -> float:
    """Fewest bytes through device memory: each input read once, the output written once."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    scales = 4 * (k // BLOCK) * (m + -(-n // BLOCK))
    return m * k + n * k + scales + 2 * m * n
