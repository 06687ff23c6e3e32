"""Compare an output with the expected one and explain a mismatch in words."""

from __future__ import annotations

from collections.abc import Callable

import torch

WORST_SHOWN = 5


Magnitude = Callable[[], torch.Tensor] | torch.Tensor | None  # see compare


def compare(
    out: torch.Tensor,
    expected: torch.Tensor,
    rtol: float,
    atol: float,
    atol_rms: float = 0.0,
    acc_rtol: float = 0.0,
    magnitude: Magnitude = None,
) -> dict:
    """Element fails if |out - ref| > atol + atol_rms*rms(ref) + rtol*|ref| + acc_rtol*mag, or out is NaN/inf where
    ref is finite.

    atol_rms scales the absolute term with the expected output's root mean square, for targets whose fast
    arithmetic adds up with fewer bits than float32 (Hopper's FP8 tensor cores): there the error of an element is
    a fraction of the terms it sums, not of its value, which cancellation can make tiny. acc_rtol is that fraction
    element by element: `magnitude` is the sum of the absolute terms of each element ((|A||B|^T)_ij for a GEMM,
    the reference module's `magnitude`), a tensor or a callable that makes it. It is made only when some element
    fails the other terms (an honest output rarely does, so the extra product is rarely paid) and is then also
    shown beside the worst elements, so a report tells limited precision (error a small share of it) from a bug."""
    got = out.detach().to(torch.float32)
    ref = expected.detach().to(torch.float32)
    if got.shape != ref.shape:
        return summary(False, got.numel(), got.numel(), 0.0, 0, f"shape {tuple(got.shape)} != {tuple(ref.shape)}")
    if atol_rms:
        finite = ref[torch.isfinite(ref)]
        atol = atol + atol_rms * (float(finite.square().mean().sqrt()) if finite.numel() else 0.0)
    err = (got - ref).abs()
    nonfinite = ~torch.isfinite(got)
    allowed = atol + rtol * ref.abs()
    broken = (nonfinite & torch.isfinite(ref)) | torch.isnan(got)
    bad = (err > allowed) | broken
    mag = None
    if magnitude is not None and bool(bad.any()):
        mag = (magnitude() if callable(magnitude) else magnitude).detach().to(torch.float32)
        if acc_rtol:
            bad = (err > allowed + acc_rtol * mag) | broken
    mismatches = int(bad.sum())
    total = got.numel()
    finite_err = torch.where(torch.isfinite(err), err, torch.zeros_like(err))
    max_err = float(finite_err.max()) if total else 0.0
    nonfinite_count = int(nonfinite.sum())
    report = "" if mismatches == 0 else _report(got, ref, err, bad, mismatches, nonfinite_count, mag)
    return summary(mismatches == 0, mismatches, total, max_err, nonfinite_count, report)


def summary(ok: bool, mismatches: int, total: int, max_err: float, nonfinite: int, report: str) -> dict:
    return {
        "ok": ok,
        "mismatches": mismatches,
        "total": total,
        "max_abs_error": max_err,
        "nan_or_inf": nonfinite,
        "report": report,
    }


def _report(got, ref, err, bad, mismatches: int, nonfinite: int, mag: torch.Tensor | None) -> str:
    total = got.numel()
    lines = [f"{mismatches} of {total} elements ({100.0 * mismatches / total:.3g}%) out of tolerance"]
    if nonfinite:
        lines.append(f"{nonfinite} NaN/inf values in the output")
    # Worst first: non-finite outputs, then the largest errors among the failing elements.
    score = torch.where(torch.isfinite(err), err, torch.full_like(err, float("inf")))
    score = torch.where(bad, score, torch.full_like(score, -1.0))
    flat = torch.topk(score.flatten(), min(WORST_SHOWN, mismatches)).indices
    terms = "; the sum of its terms' magnitudes, |A||B|^T of a GEMM" if mag is not None else ""
    lines.append(f"worst elements (index: got vs expected{terms}):")
    for index in flat.tolist():
        position = tuple(int(i) for i in torch.unravel_index(torch.tensor(index), got.shape))
        g, r = float(got.flatten()[index]), float(ref.flatten()[index])
        line = f"  {position}: {g:.6g} vs {r:.6g} (error {abs(g - r):.3g}"
        if mag is not None:
            m = float(mag.flatten()[index])
            line += f"; |terms| {m:.3g}, error {abs(g - r) / m:.2g} of it" if m > 0 else "; |terms| 0"
        lines.append(line + ")")
    rows = bad.reshape(bad.shape[0], -1).any(dim=1).nonzero().flatten() if got.dim() >= 1 else None
    if rows is not None and len(rows):
        lines.append(f"failing rows: {len(rows)} of {got.shape[0]}, first {int(rows[0])}, last {int(rows[-1])}")
    return "\n".join(lines)


def relative_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float32 (inf when the output has NaN/inf)."""
    got, ref = out.detach().to(torch.float32), expected.detach().to(torch.float32)
    if not torch.isfinite(got).all():
        return float("inf")
    return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe), for checking that inputs were left unchanged."""
    return a.shape == b.shape and torch.equal(_as_bytes(a), _as_bytes(b))


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    # reshape(-1) first: a "contiguous" tensor with a size-1 dimension may still carry a stride that view() rejects.
    return t.detach().reshape(-1).contiguous().view(torch.uint8)
