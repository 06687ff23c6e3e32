"""Nsight Compute: the command (a fixed set of sections plus the raw counters the digest needs) and its CSV.

The command asks for `--page raw --csv`: one row per launch, a column per metric, by the metric's stable name
(`sm__throughput.avg.pct_of_peak_sustained_elapsed`), with a row of units under the header. The details page
(`--page details`, one row per metric under a display name such as "Compute (SM) Throughput") is read too, by the
same code: its names are aliases below. The raw page was chosen because the stall reasons and the tensor pipe's
busy share are chart data that the details page leaves out.

Only launches inside the runner's NVTX range (ksci.profile.runner.RANGE) are profiled, so the kernels that draw the
inputs are not.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from pathlib import Path

from ksci.profile.result import BYTES, RATE, TIME_US, KernelProfile, Stall, mean, number, scaled

SECTIONS = (
    "SpeedOfLight",
    "ComputeWorkloadAnalysis",
    "MemoryWorkloadAnalysis",
    "WarpStateStats",
    "LaunchStats",
    "Occupancy",
)
# Raw counters asked for beside the sections: the tensor pipe's busy share under each name it has had, the DRAM
# rate and the duration. A name this GPU lacks is skipped by ncu with a warning.
EXTRA_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes.sum.per_second",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
)
LOG_NAME = "ncu.csv"
PERMISSION = "ERR_NVGPUCTRPERM"

# Each field: the raw metric names first, then the details page's display names.
ALIASES = {
    "duration": ("gpu__time_duration.sum", "Duration"),
    "sm": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput"),
    "memory": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput"),
    "dram": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"),
    "dram_rate": ("dram__bytes.sum.per_second", "dram__bytes_read.sum.per_second"),
    "achieved": ("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"),
    "theoretical": ("sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy"),
    "registers": ("launch__registers_per_thread", "Registers Per Thread"),
    "static_shared": ("launch__shared_mem_per_block_static", "Static Shared Memory Per Block"),
    "dynamic_shared": ("launch__shared_mem_per_block_dynamic", "Dynamic Shared Memory Per Block"),
    "cycles_per_instruction": (
        "smsp__average_warp_latency_per_inst_issued.ratio",
        "smsp__average_warps_latency_per_inst_issued.ratio",
        "Warp Cycles Per Issued Instruction",
    ),
}
LIMITS = {  # what bounds the blocks per SM, by the name the digest gives it
    "registers": ("launch__occupancy_limit_registers", "Block Limit Registers"),
    "shared memory": ("launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
    "warps": ("launch__occupancy_limit_warps", "Block Limit Warps"),
    "blocks": ("launch__occupancy_limit_blocks", "Block Limit SM"),
    "barriers": ("launch__occupancy_limit_barriers", "Block Limit Barriers"),
}
_TENSOR = re.compile(
    r"^sm__(pipe_tensor\w*_cycles_active|inst_executed_pipe_tensor\w*)\.avg\.pct_of_peak_sustained_active$"
)
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
NOT_STALLS = {"selected"}  # a warp selected to issue is not stalled

Launch = dict[str, tuple[str, str]]  # metric name -> (value text, unit)


def ncu_command(ncu: str, runner: list[str], out_dir: Path) -> list[str]:
    """The one profiler pass: the runner under ncu, its CSV written to out_dir/ncu.csv."""
    return [
        ncu, "--target-processes", "all", "--nvtx", "--nvtx-include", "ksci_profile/",
        *[arg for section in SECTIONS for arg in ("--section", section)],
        "--metrics", ",".join(EXTRA_METRICS),
        "--csv", "--page", "raw", "--log-file", str(out_dir / LOG_NAME), *runner,
    ]  # fmt: skip


def read_launches(text: str) -> list[tuple[str, Launch]]:
    """(kernel name, metrics) per profiled launch, from either CSV page; lines before the header (==PROF==, the
    program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"') and "Kernel Name" in line), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    if "Metric Name" in header:
        return _long_launches(header, rows[1:])
    return _wide_launches(header, rows[1:])


def _wide_launches(header: list[str], rows: list[list[str]]) -> list[tuple[str, Launch]]:
    """The raw page: a units row under the header, then one row per launch."""
    name_at = header.index("Kernel Name")
    # The units row has no kernel name; a CSV without it (ncu before units were printed) starts with launches.
    has_units = bool(rows) and len(rows[0]) > name_at and not rows[0][name_at]
    units, data = (rows[0], rows[1:]) if has_units else ([""] * len(header), rows)
    launches = []
    for row in data:
        if len(row) < len(header):
            continue
        metrics = {h: (row[i], units[i] if i < len(units) else "") for i, h in enumerate(header)}
        launches.append((row[name_at], metrics))
    return launches


def _long_launches(header: list[str], rows: list[list[str]]) -> list[tuple[str, Launch]]:
    """The details page: one row per (launch, metric), grouped by the launch's ID; rule rows (no metric) skipped."""
    at = {name: header.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
    grouped: dict[str, Launch] = defaultdict(dict)
    names: dict[str, str] = {}
    for row in rows:
        if len(row) <= at["Metric Value"] or not row[at["Metric Name"]]:
            continue
        launch = row[at["ID"]]
        names[launch] = row[at["Kernel Name"]]
        grouped[launch][row[at["Metric Name"]]] = (row[at["Metric Value"]], row[at["Metric Unit"]])
    return [(names[launch], grouped[launch]) for launch in grouped]


def kernel_profiles(launches: list[tuple[str, Launch]]) -> tuple[KernelProfile, ...]:
    """One KernelProfile per kernel name, each number averaged over its launches."""
    by_kernel: dict[str, list[Launch]] = defaultdict(list)
    for name, metrics in launches:
        by_kernel[name].append(metrics)
    return tuple(_kernel(name, group) for name, group in by_kernel.items())


def _kernel(name: str, launches: list[Launch]) -> KernelProfile:
    def avg(field: str, table: dict[str, float] | None = None) -> float | None:
        values = [v for m in launches if (v := _read(m, ALIASES[field], table)) is not None]
        return mean(values)

    tensor_metric, tensor = _tensor_pipe(launches)
    static, dynamic = avg("static_shared", BYTES), avg("dynamic_shared", BYTES)
    registers = avg("registers")
    return KernelProfile(
        tool="ncu",
        kernel=name,
        launches=len(launches),
        duration_us=avg("duration", TIME_US),
        sm_throughput_pct=avg("sm"),
        memory_throughput_pct=avg("memory"),
        dram_throughput_pct=avg("dram"),
        dram_bytes_per_s=avg("dram_rate", RATE),
        matrix_pipe_pct=tensor,
        matrix_metric=tensor_metric,
        achieved_occupancy_pct=avg("achieved"),
        theoretical_occupancy_pct=avg("theoretical"),
        occupancy_limiter=_limiter(launches[0]),
        stalls=_stalls(launches),
        warp_cycles_per_instruction=avg("cycles_per_instruction"),
        registers=None if registers is None else round(registers),
        shared_bytes=None if static is None and dynamic is None else round((static or 0) + (dynamic or 0)),
    )


def _read(metrics: Launch, names: tuple[str, ...], table: dict[str, float] | None = None) -> float | None:
    for name in names:
        if name in metrics:
            value, unit = metrics[name]
            parsed = number(value)
            if parsed is not None:
                return scaled(parsed, unit, table) if table else parsed
    return None


def _tensor_pipe(launches: list[Launch]) -> tuple[str, float | None]:
    """The busiest tensor-pipe counter present (Hopper's wgmma is the gmma pipe, older GPUs' hmma), averaged."""
    names = sorted({n for m in launches for n in m if _TENSOR.match(n)})
    best = ("", None)
    for name in names:
        value = mean([v for m in launches if (v := _read(m, (name,))) is not None])
        if value is not None and (best[1] is None or value > best[1]):
            best = (name, value)
    return best


def _limiter(metrics: Launch) -> str | None:
    """What allows the fewest blocks per SM (ties named together)."""
    limits = {label: v for label, names in LIMITS.items() if (v := _read(metrics, names)) is not None}
    if not limits:
        return None
    least = min(limits.values())
    return " and ".join(label for label, v in limits.items() if v == least)


def _stalls(launches: list[Launch]) -> tuple[Stall, ...]:
    """Stall reasons by cycles per issued instruction, largest first, each with its share of all stall cycles."""
    per_reason: dict[str, list[float]] = defaultdict(list)
    for metrics in launches:
        for name in metrics:
            match = _STALL.match(name)
            if match and match.group(1) not in NOT_STALLS and (v := _read(metrics, (name,))) is not None:
                per_reason[match.group(1)].append(v)
    averages = {reason: sum(v) / len(v) for reason, v in per_reason.items()}
    total = sum(averages.values())
    if total <= 0:
        return ()
    ranked = sorted(averages.items(), key=lambda item: -item[1])
    return tuple(Stall(reason, value, value / total) for reason, value in ranked if value > 0)


def failure_in(text: str) -> str | None:
    """Why ncu gave no profile, from its output: no permission to read the counters, or nothing profiled."""
    if PERMISSION in text:
        return (
            f"no permission to read the GPU's performance counters ({PERMISSION}; see ncu's docs on ERR_NVGPUCTRPERM)"
        )
    if "No kernels were profiled" in text:
        return "ncu profiled no kernel (the candidate launched none inside the profiled range)"
    errors = [line.strip() for line in text.splitlines() if line.startswith("==ERROR==")]
    return errors[0][:300] if errors else None
