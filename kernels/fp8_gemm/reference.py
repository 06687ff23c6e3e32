"""Reference, inputs and vendor baseline for the block-scaled FP8 GEMM.

Plain functions that the one harness (ksci/evaluate/harness) calls; no harness logic lives here.
All tensors follow the layouts in problem.yaml: A, B and the scales column-major, C row-major.
The draws, the reference and the vendor call are those of ksci/problem/fp8_block_scaled.py, which
kernels/fp8_gemm_kmajor shares; this file binds them to this problem's layouts.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ksci.problem import fp8_block_scaled as fp8
from ksci.problem.fp8_block_scaled import BLOCK, PROFILES, bytes_moved, flops, magnitude, reference

__all__ = ["BLOCK", "PROFILES", "bytes_moved", "flops", "generate_input", "magnitude", "reference", "vendor"]


def generate_input(shape: dict, seed: int, target: str, device: str | torch.device, profile: str = "spec") -> dict:
    """The operands of one input set (profiles: fp8_block_scaled.generate_input); A and B column-major (drawn
    K-major, transposed)."""
    return fp8.generate_input(shape, seed, target, device, profile, k_major=False)


def vendor(inputs: dict) -> Callable[[], dict] | None:
    """cuBLASLt or hipBLASLt through torch._scaled_mm, on K-major copies of A and B (fp8_block_scaled.vendor)."""
    return fp8.vendor(inputs, k_major=False)
