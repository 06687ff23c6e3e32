"""rocprofv3: the command (counter passes in one input file) and its counter-collection CSV.

The CSV is long: one row per (dispatch, counter), each with the dispatch's kernel, registers, LDS and timestamps.
Counters that do not fit in one hardware pass go in separate jobs of the input file (rocprofv3 -i), one
`pass_N/` folder each; every `*counter_collection.csv` under the output folder is read. The counters are derived
metrics of rocprofiler-sdk, chosen to answer the digest's questions: MFMA and VALU busy, occupancy, LDS bank
conflicts, the memory unit's busy share and the HBM traffic.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

from ksci.profile.result import KernelProfile, mean, number

PASSES = (("MfmaUtil", "VALUBusy"), ("OccupancyPercent", "LDSBankConflict"), ("MemUnitBusy", "FetchSize", "WriteSize"))
INPUT_NAME = "rocprofv3_input.json"
KB = 1024  # FetchSize and WriteSize count kilobytes


def rocprof_command(rocprof: str, runner: list[str], out_dir: Path, kernels: tuple[str, ...]) -> list[str]:
    """The one rocprofv3 run: its input file (written here) names the passes and the candidate's kernels."""
    job: dict = {"output_directory": str(out_dir), "output_format": ["csv"]}
    if kernels:
        job["kernel_include_regex"] = "|".join(re.escape(k) for k in kernels)
    jobs = [{**job, "pmc": list(counters)} for counters in PASSES]
    (out_dir / INPUT_NAME).write_text(json.dumps({"jobs": jobs}, indent=1))
    return [rocprof, "-i", str(out_dir / INPUT_NAME), "--", *runner]


def collected_files(out_dir: Path) -> list[Path]:
    """Every pass's counter CSV under the output folder (`pass_N/<pid>_counter_collection.csv` or flat)."""
    return sorted(out_dir.rglob("*counter_collection.csv"))


def read_rows(paths: list[Path]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in paths:
        with path.open(newline="") as stream:
            rows += list(csv.DictReader(stream))
    return rows


def kernel_profiles(rows: list[dict[str, str]]) -> tuple[KernelProfile, ...]:
    """One KernelProfile per kernel name; each counter averaged over the dispatches that measured it."""
    by_kernel: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_kernel[row.get("Kernel_Name", "")].append(row)
    return tuple(_kernel(name, group) for name, group in by_kernel.items())


def _kernel(name: str, rows: list[dict[str, str]]) -> KernelProfile:
    counters: dict[str, list[float]] = defaultdict(list)
    durations: dict[str, float] = {}
    per_dispatch: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        dispatch = row.get("Dispatch_Id", "")
        value = number(row.get("Counter_Value"))
        if value is not None:
            counters[row["Counter_Name"]].append(value)
            per_dispatch[dispatch][row["Counter_Name"]] = value
        start, end = number(row.get("Start_Timestamp")), number(row.get("End_Timestamp"))
        if start is not None and end is not None and end > start:
            durations[dispatch] = (end - start) / 1e3  # ns -> us

    def counter(counter_name: str) -> float | None:
        return mean(counters.get(counter_name, []))

    # HBM traffic over the time of the dispatch that counted it (each pass runs the kernel again).
    rates = [
        (c["FetchSize"] + c["WriteSize"]) * KB / (durations[d] * 1e-6)
        for d, c in per_dispatch.items()
        if "FetchSize" in c and "WriteSize" in c and durations.get(d)
    ]
    duration, rate = mean(list(durations.values())), mean(rates)
    first = rows[0]
    vgprs = (number(first.get("VGPR_Count")) or 0) + (number(first.get("Accum_VGPR_Count")) or 0)
    lds = number(first.get("LDS_Block_Size"))
    return KernelProfile(
        tool="rocprofv3",
        kernel=name,
        launches=len(durations) or 1,
        duration_us=duration,
        memory_throughput_pct=counter("MemUnitBusy"),
        dram_bytes_per_s=rate,
        matrix_pipe_pct=counter("MfmaUtil"),
        matrix_metric="MfmaUtil" if "MfmaUtil" in counters else "",
        vector_pipe_pct=counter("VALUBusy"),
        achieved_occupancy_pct=counter("OccupancyPercent"),
        registers=round(vgprs) if vgprs else None,
        shared_bytes=None if lds is None else round(lds),
        lds_bank_conflict_pct=counter("LDSBankConflict"),
    )


def failure_in(text: str) -> str | None:
    """Why rocprofv3 gave no profile, from its output."""
    for needle, why in (
        ("exceeds the capabilities of the hardware", "rocprofv3 could not fit the counters in one pass"),
        ("Permission denied", "no permission to read the GPU's performance counters (rocprofv3: permission denied)"),
    ):
        if needle in text:
            return why
    return None
