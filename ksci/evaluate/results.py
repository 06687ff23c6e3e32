"""Typed results that travel between stages. Failures are values, never exceptions."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum


class Status(StrEnum):
    """Verdict classes, from the earliest stage that can fail to a clean pass."""

    REJECTED = (
        "rejected"  # the static screen (ksci.evaluate.screen.source) found a construct no kernel needs; never compiled
    )
    COMPILE_ERROR = "compile_error"
    LOAD_ERROR = "load_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG = "wrong"
    SUSPICIOUS = "suspicious"
    OK = "ok"
    COMPILED = "compiled"  # --compile-only: compiled, not run


@dataclass
class KernelResources:
    """One kernel's resource report from the compiler."""

    name: str
    registers: int | None = None  # per thread (VGPRs on AMD)
    sgprs: int | None = None  # AMD scalar registers
    agprs: int | None = None  # AMD accumulation registers
    spill_bytes: int | None = None  # spill stores (CUDA) or spilled VGPRs+SGPRs (AMD)
    shared_bytes: int | None = None  # static shared memory / LDS per block
    stack_or_scratch_bytes: int | None = None  # stack frame (CUDA) / scratch per lane (AMD)
    occupancy: int | None = None  # waves per SIMD (AMD only)


@dataclass
class CompileResult:
    ok: bool
    target: str
    arch: str
    toolchain: str  # compiler and version line
    command: list[str]
    log: str
    library: str | None = None  # path of the shared library
    resources: list[KernelResources] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    source_hash: str = ""
    rejected: str = ""  # why the static screen refused the source (then nothing was compiled)


@dataclass
class HipifyResult:
    ok: bool
    source: str
    tool: str | None  # hipify-clang, hipify-perl, or None when no tool was found
    unconverted: list[str] = field(default_factory=list)  # CUDA identifiers left in the output
    log: str = ""


@dataclass
class CheckResult:
    """Correctness of one output on one input set."""

    shape: dict
    seed: int
    ok: bool
    report: str = ""  # readable mismatch report when not ok
    mismatches: int = 0
    total: int = 0
    max_abs_error: float = 0.0
    nan_or_inf: int = 0
    profile: str = "spec"  # the input profile checked (problem.yaml `inputs`)


@dataclass
class Timing:
    """Robust statistics of repeated device-event timings, in microseconds."""

    median_us: float
    iqr_us: float
    min_us: float
    reps: int

    @property
    def spread(self) -> float:
        return self.iqr_us / self.median_us if self.median_us > 0 else 0.0


@dataclass
class ShapeTiming:
    shape: dict
    kernel: Timing | None  # None in a baseline run
    reference: Timing | None = None
    vendor: Timing | None = None
    speed_of_light_us: float | None = None
    raced_against_us: float | None = None  # timed on fewer calls: it lost this shape to the run's best (--race)


@dataclass
class Verdict:
    status: Status
    problem: str
    target: str
    message: str = ""
    compile: CompileResult | None = None
    checks: list[CheckResult] = field(default_factory=list)
    timings: list[ShapeTiming] = field(default_factory=list)
    geomean_us: float | None = None
    reference_geomean_us: float | None = None
    vendor_geomean_us: float | None = None
    speed_of_light_geomean_us: float | None = None
    fingerprint: dict = field(default_factory=dict)
    harness_log: str = ""  # the child's stdout/stderr tail, for failed candidates

    @property
    def speedup_vs_reference(self) -> float | None:
        return _ratio(self.reference_geomean_us, self.geomean_us)

    @property
    def speedup_vs_vendor(self) -> float | None:
        return _ratio(self.vendor_geomean_us, self.geomean_us)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["status"] = str(self.status)
        data["speedup_vs_reference"] = self.speedup_vs_reference
        data["speedup_vs_vendor"] = self.speedup_vs_vendor
        for shape_timing in data["timings"]:
            for key in ("kernel", "reference", "vendor"):
                if shape_timing[key]:
                    t = shape_timing[key]
                    t["spread"] = t["iqr_us"] / t["median_us"] if t["median_us"] else 0.0
        return data


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return numerator / denominator


def geomean(values: list[float | None]) -> float | None:
    """Geometric mean; None when the list is empty or any value is missing or not positive."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
