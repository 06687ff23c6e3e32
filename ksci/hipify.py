"""Convert CUDA sources to HIP with AMD's hipify tools, called as subprocesses.

hipify-clang (as ROCm installs it) understands the code through clang and is preferred; hipify-perl, a
regex translator, is the fallback. Whatever CUDA-only identifier survives the conversion is reported.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ksci.results import HipifyResult

TOOLS = ("hipify-clang", "hipify-perl")
_SEARCH_PATH = ["/opt/rocm/bin", "/opt/rocm/hip/bin"]
# CUDA runtime/driver API names, CUDA-only types and intrinsics, and CUDA headers.
_CUDA_LEFTOVER = re.compile(
    r"\b(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|CU[A-Z_]{3,}\w*|__nv_\w+|nv_bfloat16\w*|cublas\w*)\b"
    r"|#include\s*[<\"](?:cuda|cublas|cuda_\w+|mma)\.?\w*\.h[>\"]"
)
_CUDA_MARKERS = re.compile(r"#include\s*[<\"]cuda|\bcuda[A-Z]\w*\(|__nv_\w+|\bcudaStream_t\b")


def looks_like_cuda(source: str) -> bool:
    """True for a source that uses CUDA headers or API names (and so needs hipify for ROCm)."""
    return _CUDA_MARKERS.search(source) is not None


def find_hipify() -> list[str]:
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH_PATH])
    return [found for tool in TOOLS if (found := shutil.which(tool, path=path))]


def unconverted_identifiers(source: str) -> list[str]:
    return sorted({m.group(0) for m in _CUDA_LEFTOVER.finditer(source)})


def hipify_source(source: str, tools: list[str] | None = None, timeout_s: float = 120) -> HipifyResult:
    """Convert with the first tool that succeeds; ok=False (with the logs) when none is installed or all fail."""
    tools = find_hipify() if tools is None else tools
    if not tools:
        return HipifyResult(False, source, None, log="neither hipify-clang nor hipify-perl was found on PATH")
    logs = []
    with tempfile.TemporaryDirectory(prefix="ksci-hipify-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.hip"
        src.write_text(source)
        for tool in tools:
            argv = _command(tool, src, out)
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
            except subprocess.TimeoutExpired:
                logs.append(f"{Path(tool).name}: timed out after {timeout_s:.0f} s")
                continue
            logs.append(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
            if proc.returncode == 0 and out.is_file() and out.stat().st_size > 0:
                converted = out.read_text()
                leftovers = unconverted_identifiers(converted)
                return HipifyResult(True, converted, Path(tool).name, leftovers, "\n".join(logs))
            out.unlink(missing_ok=True)
    return HipifyResult(False, source, None, log="\n".join(logs))


def _command(tool: str, src: Path, out: Path) -> list[str]:
    if Path(tool).name == "hipify-clang":
        cuda = os.environ.get("CUDA_PATH") or _cuda_root()
        extra = [f"--cuda-path={cuda}"] if cuda else []
        return [tool, str(src), "-o", str(out), *extra, "--", "-std=c++17"]
    return [tool, str(src), "-o", str(out)]


def _cuda_root() -> str | None:
    nvcc = shutil.which("nvcc")
    return str(Path(nvcc).resolve().parent.parent) if nvcc else None
