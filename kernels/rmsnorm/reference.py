"""Reference, inputs and vendor baseline for bf16 RMSNorm.

Plain functions that the one harness (ksci/evaluate/harness) calls; no harness logic lives here.
x and out are rows x cols row-major bfloat16, weight is cols bfloat16; the maths is float32.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

EPS = 1e-6
# Row r of x is scaled by ROW_SCALES[r % 4]. Plain randn rows have mean(x^2) ~ 1, where eps = 1e-6 changes
# the result by 5e-7 and a kernel that drops it could not be told apart; at scale 1e-3, mean(x^2) ~ eps.
ROW_SCALES = (1.0, 1e-1, 1e-2, 1e-3)


PROFILES = ("spec", "wide_range", "near_zero")  # problem.yaml `inputs:` names these


def generate_input(shape: dict, seed: int, target: str, device: str | torch.device, profile: str = "spec") -> dict:
    """x = randn * per-row scale, weight = 1 + 0.1 * randn, both bf16; out prefilled with NaN.

    `spec` (the only profile timed): row r scaled by ROW_SCALES[r % 4]. `wide_range`: each row's scale drawn
    log-uniformly from 1e-4 to 1e4 (sums of squares up to 1e8 per element, beyond fp16's range, and rows eight
    decades apart in one launch). `near_zero`: rows from 1e-7 to 1e-3, where mean(x^2) is at most eps and eps
    decides the result, every eighth row exactly zero (0 * rsqrt(eps) = 0; a kernel without eps divides 0 by 0).
    NaN in out makes an element that the kernel never writes fail the check (the harness poisons it again).
    """
    rows, cols = shape["rows"], shape["cols"]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    x = torch.randn((rows, cols), dtype=torch.float32, device=device, generator=gen)
    if profile == "spec":
        scales = torch.tensor(ROW_SCALES, dtype=torch.float32, device=device).repeat(-(-rows // 4))[:rows]
    elif profile == "wide_range":
        scales = 10.0 ** (8.0 * torch.rand(rows, device=device, generator=gen) - 4.0)
    elif profile == "near_zero":
        scales = 10.0 ** (4.0 * torch.rand(rows, device=device, generator=gen) - 7.0)
        scales[::8] = 0.0
    else:
        raise ValueError(f"unknown input profile {profile!r} (known: {', '.join(PROFILES)})")
    x = (x * scales[:, None]).to(torch.bfloat16)
    w = torch.randn((cols,), dtype=torch.float32, device=device, generator=gen)
    weight = (1.0 + 0.1 * w).to(torch.bfloat16)
    out = torch.full((rows, cols), float("nan"), dtype=torch.bfloat16, device=device)
    return {"x": x, "weight": weight, "out": out}


def reference(inputs: dict) -> dict:
    """out = x / sqrt(mean(x^2) + eps) * weight in float32, rounded once to bf16."""
    x = inputs["x"].to(torch.float32)
    rstd = torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + EPS)
    out = x * rstd * inputs["weight"].to(torch.float32)
    return {"out": out.to(torch.bfloat16)}


def vendor(inputs: dict) -> Callable[[], dict] | None:
    """torch.nn.functional.rms_norm on the given tensors (a fused or composite ATen kernel), or None
    where torch predates it (2.4)."""
    rms_norm = getattr(torch.nn.functional, "rms_norm", None)
    if rms_norm is None:
        return None
    x, weight = inputs["x"], inputs["weight"]
    cols = x.shape[-1]

    def run() -> dict:
        return {"out": rms_norm(x, (cols,), weight, EPS)}

    return run


def flops(shape: dict) -> float:
    """Per element: square, add, scale by rstd, scale by weight."""
    return 4.0 * shape["rows"] * shape["cols"]


def bytes_moved(shape: dict) -> float:
    """Fewest bytes through device memory: x read once, out written once, weight read once."""
    rows, cols = shape["rows"], shape["cols"]
    return 2 * rows * cols * 2 + 2 * cols
