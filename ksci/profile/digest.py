"""The digest: what the LLM is told about a profile, in a fixed format of about a dozen lines, never the raw report.

The roofline class follows Nsight Compute's own rule (its SOLBottleneck: throughput under 60% of peak on both the
compute and the memory side means latency, not a roof, holds the kernel back).
"""

from __future__ import annotations

from ksci.profile.result import KernelProfile, ProfileResult

ROOF_PCT = 60.0
TOP_STALLS = 4


def roofline_class(kernel: KernelProfile) -> str:
    """compute-bound, memory-bound, latency-bound (neither side near its roof), or unknown."""
    compute = max(
        (v for v in (kernel.sm_throughput_pct, kernel.matrix_pipe_pct, kernel.vector_pipe_pct) if v is not None),
        default=None,
    )
    memory = kernel.memory_throughput_pct
    if compute is None and memory is None:
        return "unknown (no throughput counters)"
    compute, memory = compute or 0.0, memory or 0.0
    if max(compute, memory) < ROOF_PCT:
        return f"latency-bound (compute {compute:.0f}%, memory {memory:.0f}% of peak: neither near its roof)"
    side = "compute-bound" if compute >= memory else "memory-bound"
    return f"{side} (compute {compute:.0f}%, memory {memory:.0f}% of peak)"


def digest(result: ProfileResult, peak_bandwidth_tbs: float | None = None) -> str:
    """The digest of a profile, or 'no profile: <why>'."""
    if not result.ok or result.main is None:
        return f"no profile: {result.why or 'the profiler measured no kernel'}"
    k = result.main
    pipe = "tensor pipe" if k.tool == "ncu" else "MFMA"
    shape = ", ".join(f"{key}={value}" for key, value in result.shape.items() if key != "seed")
    lines = [
        f"profile: {result.tool} {result.version} on {result.gpu or 'this GPU'}, shape {shape or 'default'}".rstrip(),
        f"kernel: {k.kernel[:120]} ({k.launches} launches{_us(k.duration_us, ', ')})",
        f"roofline class: {roofline_class(k)}",
        f"{pipe} busy: {_pct(k.matrix_pipe_pct)}" + (f" ({k.matrix_metric})" if k.matrix_metric else ""),
    ]
    if k.vector_pipe_pct is not None:
        lines.append(f"VALU busy: {_pct(k.vector_pipe_pct)}")
    lines.append(f"SM throughput: {_of_peak(k.sm_throughput_pct)}" if k.tool == "ncu" else "")
    lines.append(f"memory throughput: {_of_peak(k.memory_throughput_pct)}; {_bandwidth(k, peak_bandwidth_tbs)}")
    lines.append(_occupancy(k))
    lines.append(_stall_line(k))
    lines.append(_resources(k))
    return "\n".join(line for line in lines if line)


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f}%"


def _of_peak(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f}% of peak"


def _us(value: float | None, lead: str = "") -> str:
    return "" if value is None else f"{lead}{value:.1f} us each"


def _bandwidth(kernel: KernelProfile, peak_tbs: float | None) -> str:
    dram = "DRAM" if kernel.tool == "ncu" else "HBM"
    if kernel.dram_bytes_per_s is None:
        share = f" ({_pct(kernel.dram_throughput_pct)} of peak)" if kernel.dram_throughput_pct is not None else ""
        return f"{dram} bandwidth not measured{share}"
    tbs = kernel.dram_bytes_per_s / 1e12
    of_peak = f", {100 * tbs / peak_tbs:.0f}% of {peak_tbs:g} TB/s" if peak_tbs else ""
    return f"{dram} {tbs:.2f} TB/s{of_peak}"


def _occupancy(kernel: KernelProfile) -> str:
    achieved = _pct(kernel.achieved_occupancy_pct)
    theoretical = (
        "" if kernel.theoretical_occupancy_pct is None else f" of {kernel.theoretical_occupancy_pct:.1f}% theoretical"
    )
    limiter = f"; limited by {kernel.occupancy_limiter}" if kernel.occupancy_limiter else ""
    return f"occupancy achieved: {achieved}{theoretical}{limiter}"


def _stall_line(kernel: KernelProfile) -> str:
    if kernel.tool != "ncu":
        return f"LDS bank conflicts: {_pct(kernel.lds_bank_conflict_pct)}"
    if not kernel.stalls:
        return "top stalls: not measured"
    top = ", ".join(
        f"{s.reason} {s.cycles_per_instruction:.2f} ({100 * s.share:.0f}%)" for s in kernel.stalls[:TOP_STALLS]
    )
    per_instruction = kernel.warp_cycles_per_instruction
    total = f"; {per_instruction:.2f} warp cycles per issued instruction" if per_instruction is not None else ""
    return f"top stalls (cycles per issued instruction, share of stalls): {top}{total}"


def _resources(kernel: KernelProfile) -> str:
    registers = "not measured" if kernel.registers is None else str(kernel.registers)
    shared = "not measured" if kernel.shared_bytes is None else f"{kernel.shared_bytes / 1024:.1f} KiB"
    kind = "registers per thread" if kernel.tool == "ncu" else "VGPRs (arch + accum)"
    memory = "shared memory per block" if kernel.tool == "ncu" else "LDS per workgroup"
    return f"{kind}: {registers}; {memory}: {shared}"
