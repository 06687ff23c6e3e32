"""Reference, inputs and vendor baseline for the block-scaled FP8 GEMM with K-major operands.

Plain functions that the one harness (ksci/evaluate/harness) calls; no harness logic lives here.
All tensors follow the layouts in problem.yaml: A and B K-major (row-major), the scales column-major, C row-major.
The values are those of kernels/fp8_gemm for the same seed (the same draws, only A and B are stored K-major): both
bind ksci/problem/fp8_block_scaled.py, which holds the draws, the reference and the vendor call.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ksci.problem import fp8_block_scaled as fp8
from ksci.problem.fp8_block_scaled import BLOCK, PROFILES, bytes_moved, flops, magnitude, reference

__all__ = ["BLOCK", "PROFILES", "bytes_moved", "flops", "generate_input", "magnitude", "reference", "vendor"]


def generate_input(shape: dict, seed: int, target: str, device: str | torch.device, profile: str = "spec") -> dict:
    """The operands of one input set (profiles: fp8_block_scaled.generate_input); A and B K-major (row-major)."""
    return fp8.generate_input(shape, seed, target, device, profile, k_major=True)


def vendor(inputs: dict) -> Callable[[], dict] | None:
    """cuBLASLt or hipBLASLt through torch._scaled_mm (fp8_block_scaled.vendor): this problem's A and B are the
    library's own layouts, read in place where K needs no padding."""
    return fp8.vendor(inputs, k_major=True)
