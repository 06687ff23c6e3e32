"""Where a Base stands, shape by shape, and what the compiler gave it: the two tables the designer and the writer
read beside the profile digest.

Per shape: the Base's time, the Reference kernel's, the vendor library's (timed beside the Base: the lineage row's
shape_baselines_json), the speed of light (ksci.problem.roofline from the reference's flops and bytes) and the share
of it the Base reaches, and which roof bounds the shape; the shapes where the Base loses most to the vendor come
first, and at most MAX_SHAPES are listed so the prompt stays small. The resource report is the lineage row's
(the most over the source's kernels): registers, spills, stack or scratch, shared memory or LDS, occupancy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ksci.problem.roofline import DevicePeaks, peaks_for
from ksci.problem.spec import Problem, shape_key

MAX_SHAPES = 8


@dataclass(frozen=True)
class ShapeStanding:
    key: str
    base_us: float | None
    reference_us: float | None  # the Reference kernel's time (the selector's contrast), not the PyTorch reference
    vendor_us: float | None
    speed_of_light_us: float | None
    bound: str  # compute, memory or unknown

    @property
    def sol_reached_pct(self) -> float | None:
        if self.base_us and self.speed_of_light_us:
            return 100.0 * self.speed_of_light_us / self.base_us
        return None

    @property
    def vs_vendor(self) -> float | None:
        """Base time over vendor time: above 1 the Base is slower."""
        return self.base_us / self.vendor_us if self.base_us and self.vendor_us else None


def _json(row: dict | None, column: str) -> dict:
    text = (row or {}).get(column)
    return json.loads(text) if isinstance(text, str) and text else {}


def shape_standing(problem: Problem, base: dict, reference: dict | None = None) -> list[ShapeStanding]:
    """The standing of `base` (a lineage row as a dict) on each benchmark shape, worst against the vendor first."""
    times, ref_times = _json(base, "shape_times_json"), _json(reference, "shape_times_json")
    baselines = {**_json(reference, "shape_baselines_json"), **_json(base, "shape_baselines_json")}
    peaks = peaks_for(str(base.get("gpu") or ""))
    work = _work(problem)
    rows = []
    for shape in problem.benchmarks:
        key = shape_key(shape)
        sol, bound = _roof(work.get(key), peaks, problem.roofline_compute)
        vendor = (baselines.get(key) or {}).get("vendor_us")
        rows.append(ShapeStanding(key, times.get(key), ref_times.get(key), vendor, sol, bound))
    return sorted(rows, key=lambda s: (-(s.vs_vendor or 0.0), s.sol_reached_pct or 0.0))


def _work(problem: Problem) -> dict[str, tuple[float, float]]:
    """(flops, bytes) per shape from the problem's reference; empty when it cannot say (an imported problem)."""
    try:
        ref = problem.reference_module()
        return {shape_key(s): (float(ref.flops(s)), float(ref.bytes_moved(s))) for s in problem.benchmarks}
    except Exception:  # a reference without flops/bytes_moved: the standing goes on without the speed of light
        return {}


def _roof(work: tuple[float, float] | None, peaks: DevicePeaks | None, compute: str) -> tuple[float | None, str]:
    if work is None or peaks is None:
        return None, "unknown"
    compute_s = work[0] / (peaks.tflops[compute] * 1e12)
    memory_s = work[1] / (peaks.bandwidth_tbs * 1e12)
    return max(compute_s, memory_s) * 1e6, "compute" if compute_s >= memory_s else "memory"


def standing_text(rows: list[ShapeStanding], gpu: str | None, max_shapes: int = MAX_SHAPES) -> str:
    """The standing as a fixed-width table of at most `max_shapes` shapes and one line for the rest."""
    if not any(r.base_us for r in rows):
        return "no per-shape times for the Base"
    head = f"{'shape':<20}{'Base':>10}{'Reference':>11}{'vendor':>10}{'SOL':>9}{'SOL reached':>13}  {'Base vs vendor':<16}bound"
    lines = [f"Per-shape standing on {gpu or 'the GPU'} (us; SOL = speed of light from datasheet peaks; "
             "the shapes where the Base loses most to the vendor first):", head]  # fmt: skip
    for r in rows[:max_shapes]:
        lines.append(
            f"{r.key:<20}{_us(r.base_us):>10}{_us(r.reference_us):>11}{_us(r.vendor_us):>10}"
            f"{_us(r.speed_of_light_us):>9}{_pct(r.sol_reached_pct):>13}  {_gain(r.vs_vendor):<16}{r.bound}"
        )
    rest = [r.vs_vendor for r in rows[max_shapes:] if r.vs_vendor]
    if len(rows) > max_shapes:
        spread = f": Base {min(rest):.2f}x to {max(rest):.2f}x the vendor's time" if rest else ""
        lines.append(f"({len(rows) - max_shapes} more shapes{spread})")
    return "\n".join(lines)


def resources_text(base: dict, reference: dict | None) -> str:
    """The compiler's resource report of the Base and the Reference, side by side."""
    head = f"{'':<28}{'registers':>10}{'spills':>9}{'stack/scratch':>15}{'shared/LDS':>12}{'occupancy':>11}"
    lines = [
        "Compiler resource report (the most over the source's kernels; occupancy: waves per SIMD, AMD only):",
        head,
    ]
    for label, row in (("Base", base), ("Reference", reference)):
        if row is None:
            continue
        lines.append(
            f"{label + ' ' + str(row.get('candidate_id', ''))[:16]:<28}{_int(row.get('registers')):>10}"
            f"{_bytes(row.get('spill_bytes')):>9}{_bytes(row.get('scratch_bytes')):>15}"
            f"{_bytes(row.get('shared_bytes')):>12}{_int(row.get('occupancy')):>11}"
        )
    return "\n".join(lines)


def _present(value) -> bool:
    return value is not None and value == value  # NaN (pandas' null) is not a value


def _us(value: float | None) -> str:
    return f"{value:.2f}" if _present(value) else "-"


def _pct(value: float | None) -> str:
    return f"{value:.0f}%" if _present(value) else "-"


def _gain(ratio: float | None) -> str:
    if not _present(ratio):
        return "-"
    return f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"


def _int(value) -> str:
    return str(int(value)) if _present(value) else "-"


def _bytes(value) -> str:
    if not _present(value):
        return "-"
    return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{int(value)} B"
