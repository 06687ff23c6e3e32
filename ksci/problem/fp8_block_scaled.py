"""The block-scaled FP8 GEMM that kernels/fp8_gemm and kernels/fp8_gemm_kmajor both pose: its input sets, its
reference, the magnitude its check uses and the vendor baseline. Each problem's reference.py binds these to its own
layouts of A and B (`k_major`); the values are the same for the same seed, whichever the layout.

C = (A * a_scale) @ (B * b_scale)^T: A (M x K) and B (N x K) in e4m3 (the target's variant), a_scale per 1 x 128
block of A (M x K/128, column-major), b_scale per 128 x 128 block of B (N/128 x K/128, column-major), C (M x N)
bfloat16, row-major. Imports torch; the harness child imports it through the problem's reference.py.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

BLOCK = 128  # scale block edge along K (A and B) and along N (B)
PROFILES = ("spec", "full_range", "outliers", "zeros")  # problem.yaml `inputs:` names these
OUTLIER_FACTOR = 100.0  # outlier channels and tokens: this many times the rest before quantisation
ZERO_SHARE = 0.125  # the share of scale blocks that hold only zeros in the `zeros` profile


def fp8_dtype(target: str) -> torch.dtype:
    """MI300 (ROCm) uses the FNUZ variant of e4m3; Hopper (CUDA) the OCP one."""
    return torch.float8_e4m3fnuz if target == "rocm" else torch.float8_e4m3fn


def fp8_max(target: str) -> float:
    """The largest finite magnitude of the target's e4m3: 448 (e4m3fn), 240 (e4m3fnuz)."""
    return float(torch.finfo(fp8_dtype(target)).max)


def generate_input(
    shape: dict, seed: int, target: str, device: str | torch.device, profile: str, k_major: bool
) -> dict:
    """The operands of one input set; A and B K-major (row-major) where `k_major`, else column-major.

    `spec` (the challenge's inputs, the only ones timed): bf16 Gaussian values cast to FP8, Gaussian signed scales;
    the values use about 1% of e4m3's range, so sums that overflow narrow accumulators never show on them. The
    other profiles are block-quantised as real FP8 models are (DeepSeek-V3): float32 values, then each 1x128 block
    of A and 128x128 block of B divided by amax / FP8_MAX, so its largest magnitude sits at the format's maximum
    and the positive scale carries the rest. `full_range`: Gaussian values. `outliers`: a few K channels and rows
    of A and rows of B 100x the rest (the other values of their blocks fall to e4m3's subnormals). `zeros`: one
    block in eight all zero (scale 0), row magnitudes of A over seven decades and block magnitudes of B over three,
    so scales span about ten orders of magnitude (down to 1e-9) and some rows' outputs are thousands of times
    smaller than others'.
    """
    m, n, k = shape["m"], shape["n"], shape["k"]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    dt = fp8_dtype(target)
    c = torch.empty((m, n), dtype=torch.bfloat16, device=device)
    if profile == "spec":  # A and B drawn K x M and K x N, so that their transposes are column-major
        a = torch.randn((k, m), dtype=torch.bfloat16, device=device, generator=gen).to(dt).T
        b = torch.randn((k, n), dtype=torch.bfloat16, device=device, generator=gen).to(dt).T
        scale_k, scale_n = k // BLOCK, -(-n // BLOCK)
        a_scale = torch.randn((scale_k, m), dtype=torch.float32, device=device, generator=gen).T
        b_scale = torch.randn((scale_k, scale_n), dtype=torch.float32, device=device, generator=gen).T
    elif profile in PROFILES:
        x_a, x_b = _real_values(m, n, k, gen, device, profile)
        a, a_scale = _quantise(x_a, 1, dt, fp8_max(target))
        b, b_scale = _quantise(x_b, BLOCK, dt, fp8_max(target))
    else:
        raise ValueError(f"unknown input profile {profile!r} (known: {', '.join(PROFILES)})")
    a, b = (a.contiguous(), b.contiguous()) if k_major else (a.T.contiguous().T, b.T.contiguous().T)
    return {"a": a, "b": b, "a_scale": a_scale, "b_scale": b_scale, "c": c}


def _real_values(m: int, n: int, k: int, gen: torch.Generator, device, profile: str) -> tuple:
    """Float32 A (M x K) and B (N x K) before quantisation, shaped as `profile` says (see generate_input)."""

    def uniform(*size: int) -> torch.Tensor:
        return torch.rand(size, dtype=torch.float32, device=device, generator=gen)

    x_a = torch.randn((m, k), dtype=torch.float32, device=device, generator=gen)
    x_b = torch.randn((n, k), dtype=torch.float32, device=device, generator=gen)
    if profile == "outliers":
        picks = torch.randperm(k, device=device, generator=gen)[: max(1, k // 512)]
        x_a[:, picks] *= OUTLIER_FACTOR  # outlier channels of the activations
        x_a[torch.randperm(m, device=device, generator=gen)[:2]] *= OUTLIER_FACTOR  # outlier tokens
        x_b[torch.randperm(n, device=device, generator=gen)[:2]] *= OUTLIER_FACTOR  # outlier output channels
    elif profile == "zeros":
        x_a *= 10.0 ** (7.0 * uniform(m, 1) - 6.0)  # rows from 1e-6 to 10
        kb, nb = k // BLOCK, -(-n // BLOCK)
        b_blocks = 10.0 ** (3.0 * uniform(nb, kb) - 3.0)  # blocks of B from 1e-3 to 1
        b_blocks = b_blocks.repeat_interleave(BLOCK, dim=0)[:n].repeat_interleave(BLOCK, dim=1)
        x_b *= b_blocks
        a_zero = uniform(m, kb) < ZERO_SHARE
        a_zero[: max(1, m // 8), 0] = True  # some rows start with a zero block, whatever the draw
        x_a *= (~a_zero).repeat_interleave(BLOCK, dim=1)
        b_zero = (uniform(nb, kb) < ZERO_SHARE).repeat_interleave(BLOCK, dim=0)[:n].repeat_interleave(BLOCK, dim=1)
        x_b *= ~b_zero
    return x_a, x_b


def _quantise(x: torch.Tensor, rows: int, dt: torch.dtype, top: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x (R x K) in blocks of `rows` x 128 to FP8 with scale = amax / top per block (0 for an all-zero block).

    Returns the K-major FP8 tensor and the scales, (R/rows rounded up) x K/128, column-major as the task has them.
    """
    r, k = x.shape
    blocks_r = -(-r // rows)
    padded = torch.zeros((blocks_r * rows, k), dtype=x.dtype, device=x.device)
    padded[:r] = x
    amax = padded.abs().reshape(blocks_r, rows, k // BLOCK, BLOCK).amax(dim=(1, 3))
    scale = amax / top
    per_element = scale.repeat_interleave(rows, dim=0)[:r].repeat_interleave(BLOCK, dim=1)
    q = torch.where(per_element > 0, x / torch.where(per_element > 0, per_element, 1.0), 0.0)
    q = q.clamp(-top, top).to(dt)
    return q, scale.T.contiguous().T


def reference(inputs: dict) -> dict:
    """Dequantise both operands in float32 and multiply (no TF32), as the task defines it."""
    a32, b32 = dequantised(inputs)
    return {"c": (a32 @ b32.T).to(torch.bfloat16)}


def magnitude(inputs: dict) -> dict:
    """(|A||B|^T)_ij = sum_k |a_ik b_jk| of the dequantised operands, in float32 on the inputs' device.

    The check's `acc_rtol` term (ksci/evaluate/harness/check.py): the error of a dot product summed in limited
    precision (Hopper's FP8 tensor cores keep about 14 bits inside each 128-wide K block) is a share of the sum of
    its terms' magnitudes, not of its value, which cancellation can make tiny."""
    a32, b32 = dequantised(inputs)
    return {"c": a32.abs_() @ b32.abs_().T}


def dequantised(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """A (M x K) and B (N x K) times their block scales, in float32."""
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    a_scale = inputs["a_scale"].repeat_interleave(BLOCK, dim=1)[:, :k]
    b_scale = inputs["b_scale"].repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    return a.to(torch.float32) * a_scale, b.to(torch.float32) * b_scale


def vendor(inputs: dict, k_major: bool) -> Callable[[], dict] | None:
    """cuBLASLt (CUDA) or hipBLASLt (ROCm) block-scaled FP8 GEMM through torch._scaled_mm.

    Layouts that cuBLASLt accepts (torch 2.11, CUDA 13, checked on an H200): A row-major (K contiguous), B.T
    column-major (B row-major), scale_a (M, K/128) M-major, scale_b (K/128, N/128) with strides (1, K/128). With
    K/128 not a multiple of 4 it returned wrong results and refused padded scale strides, so there K is padded with
    zeros to the next multiple of 512 (K = 256 and 2304 here: the library then does up to twice the work on
    K = 256). `k_major`: A and B come K-major, so where K needs no padding the library reads them in place; else
    they are copied K-major. All of this preparation happens once, outside the timed call. None where torch has no
    block-scaled path.
    """
    if not hasattr(torch, "_scaled_mm") or inputs["a"].device.type != "cuda":
        return None
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    kb, nb = k // BLOCK, -(-n // BLOCK)
    kb_pad = -(-kb // 4) * 4
    if k_major and kb_pad == kb:  # no copies: the library reads the inputs in place
        a_k, b_k = a, b
    else:
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
