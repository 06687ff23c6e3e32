"""The typed record of a profile, the same for both vendors, and the numbers read from CSV cells.

A field the profiler did not report is None, and the digest says "not measured": a missing counter is a fact about
the tool or the GPU, not a zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Units Nsight Compute and rocprofv3 print, as factors to microseconds, bytes and bytes per second.
TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "KB": 1024, "KiB": 1024, "MB": 1024**2}
RATE = {f"{unit}/s": factor for unit, factor in BYTES.items()} | {
    f"{unit}/second": factor for unit, factor in BYTES.items()
}


@dataclass(frozen=True)
class Stall:
    """One reason warps could not issue: cycles per issued instruction, and its share of all stall cycles."""

    reason: str
    cycles_per_instruction: float
    share: float


@dataclass(frozen=True)
class KernelProfile:
    """One kernel of the candidate, averaged over its profiled launches."""

    tool: str  # ncu or rocprofv3
    kernel: str
    launches: int
    duration_us: float | None = None
    sm_throughput_pct: float | None = None  # compute (SM) throughput, % of peak
    memory_throughput_pct: float | None = None  # the busiest memory unit, % of peak
    dram_throughput_pct: float | None = None
    dram_bytes_per_s: float | None = None
    matrix_pipe_pct: float | None = None  # tensor pipe (CUDA) or MFMA (ROCm) busy, % of peak
    matrix_metric: str = ""  # the counter it was read from, to compare with a hand-run profiler
    vector_pipe_pct: float | None = None  # VALU busy (ROCm)
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    occupancy_limiter: str | None = None  # registers, shared memory, warps, blocks, barriers
    stalls: tuple[Stall, ...] = ()
    warp_cycles_per_instruction: float | None = None
    registers: int | None = None  # per thread (VGPRs on AMD)
    shared_bytes: int | None = None  # per block, static + dynamic (LDS on AMD)
    lds_bank_conflict_pct: float | None = None  # ROCm


@dataclass(frozen=True)
class ProfileResult:
    """A profile, or why there is none (ok False, `why` in one line): failures travel as this value."""

    ok: bool
    tool: str
    version: str = ""
    why: str = ""
    gpu: str = ""
    shape: dict = field(default_factory=dict)
    kernels: tuple[KernelProfile, ...] = ()
    seconds: float = 0.0
    command: tuple[str, ...] = ()

    @property
    def main(self) -> KernelProfile | None:
        """The kernel that took the most time over its launches: the one the digest describes."""
        timed = [(k.duration_us or 0.0) * k.launches for k in self.kernels]
        return self.kernels[timed.index(max(timed))] if self.kernels else None


def number(text: str | None) -> float | None:
    """A CSV cell as a float: thousands separators dropped (ncu prints 1,215,000,000.00), n/a and blanks None."""
    if text is None:
        return None
    cleaned = str(text).strip().replace(",", "")
    if not cleaned:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def scaled(value: float | None, unit: str, table: dict[str, float]) -> float | None:
    """`value` in `unit` converted by `table`; a unit the table lacks is taken as the table's base unit. A per-block
    size (`Kbyte/block`) is a size."""
    unit = unit.strip().removesuffix("/block")
    return None if value is None else value * table.get(unit, 1.0)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
