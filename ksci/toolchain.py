"""The two toolchains, CUDA (nvcc) and ROCm (hipcc): how to call them and how to read their resource reports.

Everything else in ksci is shared by both targets; this module and the kernel source are all that differ.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from ksci.results import KernelResources

DEFAULT_CUDA_ARCH = "sm_90a"
DEFAULT_ROCM_ARCH = "gfx942"


class ToolchainMissing(RuntimeError):
    """The compiler for a target is not installed."""


@dataclass(frozen=True)
class Toolchain:
    target: str  # "cuda" or "rocm"
    compiler: str  # absolute path
    version: str  # one line, part of the compile cache key

    def command(self, source: str, library: str, arch: str, extra_flags: tuple[str, ...] = ()) -> list[str]:
        common = ["-O3", "-std=c++17", "-shared", *extra_flags, source, "-o", library]
        if self.target == "cuda":
            base = arch.removeprefix("sm_")
            gencode = f"-gencode=arch=compute_{base},code=sm_{base}"
            # -cudart shared: the library imports the runtime's functions by name from libcudart.so (the one torch
            # has loaded) instead of linking a static copy that imports half of libc; what it imports can then be
            # checked against an allowlist (ksci/libcheck.py).
            return [
                self.compiler,
                gencode,
                "-cudart",
                "shared",
                "-Xcompiler",
                "-fPIC",
                "-Xptxas",
                "-v",
                "-lineinfo",
                *common,
            ]
        return [
            self.compiler,
            f"--offload-arch={arch}",
            "-fPIC",
            "-Rpass-analysis=kernel-resource-usage",
            *common,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.target == "rocm":
            env["HIP_PLATFORM"] = "amd"  # hipcc would otherwise take the NVIDIA path when nvcc is present
        return env

    def parse_resources(self, log: str) -> list[KernelResources]:
        return parse_ptxas(log) if self.target == "cuda" else parse_amdgpu_remarks(log)


def find_toolchain(target: str) -> Toolchain:
    name = {"cuda": "nvcc", "rocm": "hipcc"}[target]
    path = shutil.which(name, path=_search_path(target))
    if path is None:
        raise ToolchainMissing(f"{name} not found: install it or put it on PATH to build {target} kernels")
    return Toolchain(target, path, _version_line(target, path))


def _search_path(target: str) -> str:
    extra = {"cuda": ["/usr/local/cuda/bin"], "rocm": ["/opt/rocm/bin"]}[target]
    return os.pathsep.join([os.environ.get("PATH", ""), *extra])


@functools.cache
def _version_line(target: str, path: str) -> str:
    env = dict(os.environ, HIP_PLATFORM="amd") if target == "rocm" else None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, env=env, timeout=60).stdout
    wanted = "release" if target == "cuda" else "HIP version"
    lines = [line.strip() for line in out.splitlines() if wanted in line or "clang version" in line]
    return "; ".join(lines) or out.strip().splitlines()[-1]


def default_arch(target: str) -> str:
    """The GPU's own architecture where one is visible, else the default (sm_90a / gfx942)."""
    if target == "cuda":
        return os.environ.get("KSCI_CUDA_ARCH") or _cuda_arch_from_gpu() or DEFAULT_CUDA_ARCH
    return os.environ.get("KSCI_ROCM_ARCH") or _rocm_arch_from_gpu() or DEFAULT_ROCM_ARCH


def _cuda_arch_from_gpu() -> str | None:
    out = _run_quietly(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    match = re.match(r"(\d+)\.(\d+)", out)
    if not match:
        return None
    major, minor = match.groups()
    # Hopper's wgmma/setmaxnreg need the arch-specific "a" target.
    return f"sm_{major}{minor}a" if major == "9" else f"sm_{major}{minor}"


def _rocm_arch_from_gpu() -> str | None:
    match = re.search(r"\bgfx9\w+", _run_quietly(["rocminfo"]))
    return match.group(0) if match else None


def _run_quietly(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


_PTXAS_FUNC = re.compile(r"Function properties for (\S+)")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\S+)'")


def parse_ptxas(log: str) -> list[KernelResources]:
    """Read `nvcc -Xptxas -v`: registers, spills, stack frame and static shared memory per kernel."""
    kernels: dict[str, KernelResources] = {}
    current = None
    for line in log.splitlines():
        if m := (_PTXAS_ENTRY.search(line) or _PTXAS_FUNC.search(line)):
            current = kernels.setdefault(m.group(1), KernelResources(name=m.group(1)))
        elif current and (m := _PTXAS_FRAME.search(line)):
            current.stack_or_scratch_bytes = int(m.group(1))
            current.spill_bytes = int(m.group(2))
        elif current and (m := _PTXAS_USED.search(line)):
            current.registers = int(m.group(1))
            current.shared_bytes = int(m.group(2) or 0)
    return [k for k in kernels.values() if k.registers is not None]


_REMARK = re.compile(
    r"remark:\s+(?:\S+:\d+:\d+:\s+)?\s*([A-Za-z][^:\n]*?):\s+(\S+)\s+\[-Rpass-analysis=kernel-resource-usage\]"
)


def parse_amdgpu_remarks(log: str) -> list[KernelResources]:
    """Read clang's `-Rpass-analysis=kernel-resource-usage` remarks: VGPRs, SGPRs, spills, LDS, scratch."""
    kernels: list[KernelResources] = []
    for key, value in _REMARK.findall(log):
        if key == "Function Name":
            kernels.append(KernelResources(name=value))
            continue
        if not kernels or not value.isdigit():
            continue
        k, v = kernels[-1], int(value)
        if key == "VGPRs":
            k.registers = v
        elif key == "SGPRs":
            k.sgprs = v
        elif key == "AGPRs":
            k.agprs = v
        elif key.startswith("ScratchSize"):
            k.stack_or_scratch_bytes = v
        elif key.startswith("Occupancy"):
            k.occupancy = v
        elif key.startswith("LDS Size"):
            k.shared_bytes = v
        elif key.endswith("Spill"):
            k.spill_bytes = (k.spill_bytes or 0) + v
    return kernels
