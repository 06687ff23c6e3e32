"""The two toolchains, CUDA (nvcc) and ROCm (hipcc, or clang in HIP mode): how to call them and how to read their
resource reports.

Everything else in ksci is shared by both targets; this module and the kernel source are all that differ.
ROCm's compiler is chosen per architecture: hipcc where it can target the arch (ROCm 6's hipcc knows gfx942), else
a newer clang++ in HIP mode (Debian bookworm's hipcc is HIP 5.2 on clang 15, which stops at gfx940; its clang-19
knows gfx942). Debian's ROCm device libraries (5.2) lack the one-constant `oclc_isa_version_942.bc` that clang
links for gfx942, so a copy of that folder with the missing file derived from gfx940's is made once (see
rocm_device_libs).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ksci.evaluate.results import KernelResources

DEFAULT_CUDA_ARCH = "sm_90a"
DEFAULT_ROCM_ARCH = "gfx942"


class ToolchainMissing(RuntimeError):
    """The compiler for a target is not installed."""


@dataclass(frozen=True)
class Toolchain:
    target: str  # "cuda" or "rocm"
    compiler: str  # absolute path
    version: str  # one line naming the driver and its version: part of the compile cache key and of each result
    device_libs: str | None = None  # clang in HIP mode only: the ROCm bitcode folder it links

    def command(self, source: str, library: str, arch: str, extra_flags: tuple[str, ...] = ()) -> list[str]:
        common = ["-O3", "-std=c++17", "-shared", *extra_flags, source, "-o", library]
        if self.target == "cuda":
            base = arch.removeprefix("sm_")
            gencode = f"-gencode=arch=compute_{base},code=sm_{base}"
            # -cudart shared: the library imports the runtime's functions by name from libcudart.so (the one torch
            # has loaded) instead of linking a static copy that imports half of libc; what it imports can then be
            # checked against an allowlist (ksci/evaluate/screen/library.py).
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
        hip_mode = ["-x", "hip", f"--rocm-device-lib-path={self.device_libs}"] if self.device_libs else []
        return [
            self.compiler,
            *hip_mode,
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


def find_toolchain(target: str, arch: str | None = None) -> Toolchain:
    """The compiler for `target`; for ROCm the one that can build `arch` (default: default_arch("rocm"))."""
    if target == "cuda":
        path = shutil.which("nvcc", path=_search_path(target))
        if path is None:
            raise ToolchainMissing("nvcc not found: install it or put it on PATH to build cuda kernels")
        return Toolchain(target, path, _version_line(target, path))
    arch = arch or default_arch("rocm")
    hipcc = shutil.which("hipcc", path=_search_path(target))
    if hipcc and hipcc_targets(hipcc, arch):
        return Toolchain(target, hipcc, "hipcc: " + _version_line(target, hipcc))
    clang = find_hip_clang(arch)
    if clang is None:
        found = f"hipcc ({hipcc}) cannot target {arch}" if hipcc else "hipcc not found"
        raise ToolchainMissing(
            f"{found}, and no clang++ in HIP mode that can: install ROCm, or Debian's clang-19 and lld-19 "
            "(apt-get install clang-19 lld-19 hipcc)"
        )
    return Toolchain(
        target, clang, f"{Path(clang).name} -x hip: {_version_line('clang', clang)}", rocm_device_libs(clang)
    )


HIP_CLANG_NAMES = ("clang++-19", "clang++-20", "clang++-18", "clang++-17", "clang++")


def find_hip_clang(arch: str) -> str | None:
    """The first clang++ on PATH (newest Debian names first) that compiles HIP for `arch`."""
    for name in HIP_CLANG_NAMES:
        path = shutil.which(name, path=_search_path("rocm"))
        if path and _can_build_hip(path, arch, rocm_device_libs(path)):
            return path
    return None


def hipcc_targets(hipcc: str, arch: str) -> bool:
    """Whether this hipcc's clang knows `arch` (Debian's hipcc 5.2 on clang 15 knows gfx940, not gfx942)."""
    return _can_build_hip(hipcc, arch, None)


_PROBE = "#include <hip/hip_runtime.h>\n__global__ void probe(float* x) { x[threadIdx.x] = 1.0f; }\n"


@functools.cache
def _can_build_hip(compiler: str, arch: str, device_libs: str | None) -> bool:
    """Compile a one-line kernel for `arch` (device code only): the cheapest honest answer to "can it?"."""
    with tempfile.TemporaryDirectory(prefix="ksci-probe-") as tmp:
        source = Path(tmp) / "probe.hip"
        source.write_text(_PROBE)
        flags = ["-x", "hip", f"--rocm-device-lib-path={device_libs}"] if device_libs else []
        argv = [compiler, *flags, f"--offload-arch={arch}", "--cuda-device-only", "-c", str(source), "-o", f"{tmp}/o"]
        try:
            proc = subprocess.run(argv, capture_output=True, env=dict(os.environ, HIP_PLATFORM="amd"), timeout=120)
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0


# Folders where distributions put the ROCm device libraries (ockl, ocml, oclc_*): ROCm's own, then Debian's.
_BITCODE_DIRS = ("/opt/rocm/amdgcn/bitcode", "/opt/rocm/lib/llvm/lib/clang/amdgcn/bitcode")
_DEBIAN_BITCODE = "/usr/lib/{multiarch}/amdgcn/bitcode"
# `__oclc_ISA_version` of the CDNA3 chips that Debian's 5.2 device libraries lack (gfx940's is 9400).
_MISSING_ISA_VERSIONS = {"941": 9401, "942": 9402}


@functools.cache
def rocm_device_libs(clang: str) -> str | None:
    """A ROCm bitcode folder for clang's HIP mode that has gfx941/gfx942's ISA-version library.

    Where the system's folder lacks them (Debian's 5.2), a copy (symbolic links) is made under
    $XDG_CACHE_HOME/ksci with each missing file derived from oclc_isa_version_940.bc: the file holds one
    constant, __oclc_ISA_version, 9400 for gfx940 and 940x for gfx94x, as in ROCm's own device libraries.
    """
    system = _system_bitcode_dir()
    if system is None:
        return None
    if all((system / f"oclc_isa_version_{v}.bc").is_file() for v in _MISSING_ISA_VERSIONS):
        return str(system)
    bin_dir = Path(os.path.realpath(clang)).parent
    llvm_dis, llvm_as = bin_dir / "llvm-dis", bin_dir / "llvm-as"
    if not (llvm_dis.is_file() and llvm_as.is_file()):
        return str(system)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ksci"
    folder = cache / f"rocm-bitcode-{bin_dir.parent.name}"  # e.g. rocm-bitcode-llvm-19
    if (folder / "oclc_isa_version_942.bc").is_file():
        return str(folder)
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".rocm-bitcode-", dir=cache))
    for bc in system.glob("*.bc"):
        (work / bc.name).symlink_to(bc)
    text = subprocess.run(
        [str(llvm_dis), str(system / "oclc_isa_version_940.bc"), "-o", "-"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for suffix, version in _MISSING_ISA_VERSIONS.items():
        if not (system / f"oclc_isa_version_{suffix}.bc").is_file():
            derived = text.replace("i32 9400", f"i32 {version}")
            subprocess.run(
                [str(llvm_as), "-", "-o", str(work / f"oclc_isa_version_{suffix}.bc")],
                input=derived,
                text=True,
                check=True,
                timeout=60,
            )
    try:
        os.rename(work, folder)  # atomic publish; a concurrent twin may have won the race
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
    return str(folder)


def _system_bitcode_dir() -> Path | None:
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    for candidate in (*_BITCODE_DIRS, _DEBIAN_BITCODE.format(multiarch=multiarch or "x86_64-linux-gnu")):
        if (Path(candidate) / "oclc_isa_version_940.bc").is_file():
            return Path(candidate)
    return None


def _search_path(target: str) -> str:
    extra = {"cuda": ["/usr/local/cuda/bin"], "rocm": ["/opt/rocm/bin"]}[target]
    return os.pathsep.join([os.environ.get("PATH", ""), *extra])


@functools.cache
def _version_line(target: str, path: str) -> str:
    env = dict(os.environ, HIP_PLATFORM="amd") if target == "rocm" else None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, env=env, timeout=60).stdout
    wanted = {"cuda": "release", "rocm": "HIP version", "clang": "clang version"}[target]
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
    return demangle_names([k for k in kernels.values() if k.registers is not None])


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
    return demangle_names(kernels)


# binutils' demangler, then CUDA's (which also knows CUDA's own manglings); neither: the names stay as they are.
_DEMANGLERS = ("c++filt", "cu++filt")


def demangle_names(kernels: list[KernelResources]) -> list[KernelResources]:
    """The kernels with their C++ names as a reader knows them: `(anonymous namespace)::fp8_gemm_mma_kernel(...)`,
    not `_ZN41_GLOBAL__N__80d6f9e2_9_kernel_cu_fp8_gemm19fp8_gemm_mma...`."""
    for kernel, name in zip(kernels, demangle([k.name for k in kernels]), strict=True):
        kernel.name = name
    return kernels


def demangle(names: list[str]) -> list[str]:
    """Each Itanium-mangled name (`_Z...`) demangled, in one call of the first demangler found; any other name, or
    every name when no demangler is installed or it fails, as it was."""
    mangled = [name for name in names if name.startswith("_Z")]
    tool = next((found for tool in _DEMANGLERS if (found := shutil.which(tool, path=_search_path("cuda")))), None)
    if not mangled or tool is None:
        return list(names)
    try:
        proc = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return list(names)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(mangled):
        return list(names)
    readable = dict(zip(mangled, lines, strict=True))
    return [readable.get(name, name) for name in names]
