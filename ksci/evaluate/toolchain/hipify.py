"""Convert CUDA sources to HIP: hipify-clang, else hipify-perl, else torch's converter (torch.utils.hipify).

hipify-clang (as ROCm installs it) understands the code through clang and is preferred; hipify-perl, a regex
translator, comes next; torch's converter, the same kind of table-driven rewrite, is there wherever torch is
installed (the CPU machines and CI have no ROCm). Each runs as a subprocess. The result names the converter that
ran and every CUDA-only identifier that survived the conversion.

Some CUDA cannot be converted meaningfully whatever the tool: inline PTX (wgmma, TMA copies, mbarriers, ldmatrix:
NVIDIA's instruction set), the driver API's tensor maps (cudaTypedefs.h, CUtensorMap) and libcu++'s cuda::
headers. Such a source is refused before any tool runs, as a value whose log names each construct and its line.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ksci.evaluate.results import HipifyResult

TORCH = "torch.utils.hipify"
TOOLS = ("hipify-clang", "hipify-perl", TORCH)
LEFT_CUDA_ONLY = "left CUDA-only code it has no mapping for"  # a converter's output that kept a CUDA header
REFUSED = "cannot be converted to HIP: "  # a source with constructs no converter can carry over
_SEARCH_PATH = ["/opt/rocm/bin", "/opt/rocm/hip/bin"]
# CUDA runtime/driver API names, CUDA-only types and intrinsics, and CUDA headers.
_CUDA_LEFTOVER = re.compile(
    r"\b(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|CU[A-Z_]{3,}\w*|__nv_\w+|nv_bfloat16\w*|cublas\w*|__\w+_sync|__syncwarp)\b"
    r"|#include\s*[<\"](?:cuda|cublas|cuda_\w+|mma)\.?\w*\.h[>\"]"
)
_CUDA_MARKERS = re.compile(r"#include\s*[<\"]cuda|\bcuda[A-Z]\w*\(|__nv_\w+|\bcudaStream_t\b")
_INLINE_ASM = re.compile(r"\basm\s*(?:volatile\s*|__volatile__\s*)?\(\s*((?:\"[^\"]*\"\s*)+)")
_PTX_OPCODE = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)?")
_NO_HIP_EQUIVALENT = (
    (
        re.compile(r"#include\s*[<\"]cudaTypedefs\.h[>\"]"),
        "cudaTypedefs.h (the driver API's typedefs, for TMA tensor maps)",
    ),
    (re.compile(r"\bCUtensorMap\w*"), "CUtensorMap (TMA tensor maps)"),
    (re.compile(r"#include\s*[<\"]cuda/\w+[>\"]"), "libcu++ (#include <cuda/...>)"),
)
# torch's converter: python -c SCRIPT IN1 OUT1 IN2 OUT2 ... (one process for many files: torch loads once).
_TORCH_SCRIPT = """
import sys, pathlib, tempfile
from torch.utils.hipify import hipify_python
pairs = list(zip(sys.argv[1::2], sys.argv[2::2]))
with tempfile.TemporaryDirectory() as tmp:
    project, converted = pathlib.Path(tmp) / "project", pathlib.Path(tmp) / "converted"
    project.mkdir()
    for i, (src, _) in enumerate(pairs):
        (project / f"kernel{i}.cu").write_text(pathlib.Path(src).read_text())
    results = hipify_python.hipify(project_directory=str(project), output_directory=str(converted),
                                   extensions=(".cu",), includes=["*"], show_progress=False,
                                   is_pytorch_extension=True, hip_clang_launch=True)
    for i, (_, out) in enumerate(pairs):
        result = results[str(converted / f"kernel{i}.cu")]
        print(f"kernel{i}.cu: {result.status}")
        if result.hipified_path:
            pathlib.Path(out).write_text(pathlib.Path(result.hipified_path).read_text())
"""
# ECMA-48 control sequences (colours, cursor moves) and operating-system commands (titles, links).
_TERMINAL_CODES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CUDA_INCLUDE = re.compile(r"#include\s*[<\"](?:cuda\w*|cublas\w*|mma|cooperative_groups/\w+)(?:\.h)?[>\"]")


def looks_like_cuda(source: str) -> bool:
    """True for a source that uses CUDA headers or API names (and so needs hipify for ROCm)."""
    return _CUDA_MARKERS.search(source) is not None


def find_hipify() -> list[str]:
    """The converters here, in the order they are tried: hipify-clang, hipify-perl (paths), torch's (by name)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH_PATH])
    found = [found for tool in TOOLS[:2] if (found := shutil.which(tool, path=path))]
    return found + ([TORCH] if _torch_available() else [])


def _torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def unconverted_identifiers(source: str) -> list[str]:
    return sorted({m.group(0) for m in _CUDA_LEFTOVER.finditer(source)})


def without_hip_equivalent(source: str) -> list[str]:
    """The constructs of a CUDA source that no converter can turn into HIP, each with its first line."""
    found: dict[str, int] = {}
    for match in _INLINE_ASM.finditer(source):
        text = "".join(re.findall(r"\"([^\"]*)\"", match.group(1)))
        what = f"inline PTX {_ptx_opcode(text)}"
        found.setdefault(what, _line(source, match.start()))
    for pattern, what in _NO_HIP_EQUIVALENT:
        match = pattern.search(source)
        if match:
            found.setdefault(what, _line(source, match.start()))
    return [f"{what} (line {line}) has no HIP equivalent" for what, line in found.items()]


def _ptx_opcode(text: str) -> str:
    """The first instruction of an asm string: directives (.reg), braces, labels and predicates (@p) skipped."""
    for statement in re.split(r";|\\n|\{|\}", text):
        statement = re.sub(r"^\s*(?:@!?\w+\s+|\w+:\s*)*", "", statement).strip()
        if statement and not statement.startswith("."):
            match = _PTX_OPCODE.match(statement)
            if match:  # the family: wgmma, mbarrier, ...; cp.async and the like keep their second part
                family, _, rest = match.group(0).partition(".")
                return f"{family}.{rest}" if family in ("cp", "fence", "mma", "ld", "st", "red") and rest else family
    return "asm"


def _line(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


def hipify_source(source: str, tools: list[str] | None = None, timeout_s: float = 120) -> HipifyResult:
    """Convert with the first tool that succeeds; ok=False (with the report) for a source that cannot be
    converted, when no converter is installed, or when every one fails."""
    blocked = refusal(source)
    if blocked:
        return blocked
    tools = find_hipify() if tools is None else tools
    if not tools:
        return _failed(source, f"no converter: none of {', '.join(TOOLS)} is installed")
    logs = []
    for tool in tools:
        if tool == TORCH:
            result = hipify_with_torch([source], timeout_s)[0]
        else:
            result = _run_tool(tool, source, timeout_s)
        if result.ok:
            result.log = "\n".join([*logs, result.log])
            return result
        logs.append(result.log)
    return _failed(source, "\n".join(logs))


def refusal(source: str) -> HipifyResult | None:
    """The failed result for a source with constructs no converter can carry over; None for any other."""
    blocked = without_hip_equivalent(source)
    if not blocked:
        return None
    return HipifyResult(False, source, None, log=REFUSED + "; ".join(blocked))


def hipify_with_torch(sources: list[str], timeout_s: float = 300) -> list[HipifyResult]:
    """torch's converter on several sources in one process (torch's import is most of its time)."""
    with tempfile.TemporaryDirectory(prefix="ksci-hipify-") as tmp:
        argv = [sys.executable, "-c", _TORCH_SCRIPT]
        for i, source in enumerate(sources):
            (Path(tmp) / f"in{i}.cu").write_text(source)
            argv += [str(Path(tmp) / f"in{i}.cu"), str(Path(tmp) / f"out{i}.hip")]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
            log = f"$ {TORCH}\n{plain_text(proc.stdout + proc.stderr)}"
        except subprocess.TimeoutExpired:
            log = f"{TORCH}: timed out after {timeout_s:.0f} s"
        outs = [Path(tmp) / f"out{i}.hip" for i in range(len(sources))]
        return [
            _converted(TORCH, source, out.read_text(), log)
            if out.is_file() and out.stat().st_size
            else _failed(source, log)
            for source, out in zip(sources, outs, strict=True)
        ]


def _run_tool(tool: str, source: str, timeout_s: float) -> HipifyResult:
    name = Path(tool).name
    with tempfile.TemporaryDirectory(prefix="ksci-hipify-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.hip"
        src.write_text(source)
        try:
            proc = subprocess.run(_command(tool, src, out), capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired:
            return _failed(source, f"{name}: timed out after {timeout_s:.0f} s")
        log = f"$ {name} {src.name}\n{plain_text(proc.stdout + proc.stderr)}"
        if proc.returncode == 0 and out.is_file() and out.stat().st_size > 0:
            return _converted(name, source, out.read_text(), log)
        return _failed(source, log)


def plain_text(output: str) -> str:
    """A converter's output without its terminal codes (torch's prints its last line in green): the log goes to
    the terminal's one-line errors, JSON verdicts and prompts, where the codes are noise. A regular expression for
    the escape sequences (CSI, OSC) and not rich's Text.from_ansi, which also plays carriage returns and so drops
    the text before one."""
    return _TERMINAL_CODES.sub("", output)


def _converted(tool: str, source: str, converted: str, log: str) -> HipifyResult:
    """A converter's output; not ok where it kept a CUDA header, which no HIP compiler can include."""
    leftovers = unconverted_identifiers(converted)
    headers = [m.group(0) for m in _CUDA_INCLUDE.finditer(converted)]
    if headers:
        why = f"{tool} {LEFT_CUDA_ONLY}: {', '.join(leftovers)}"
        return HipifyResult(False, source, tool, leftovers, f"{log}\n{why}")
    return HipifyResult(True, converted, tool, leftovers, log)


def _failed(source: str, log: str) -> HipifyResult:
    return HipifyResult(False, source, None, log=log)


def _command(tool: str, src: Path, out: Path) -> list[str]:
    if Path(tool).name == "hipify-clang":
        cuda = os.environ.get("CUDA_PATH") or _cuda_root()
        extra = [f"--cuda-path={cuda}"] if cuda else []
        return [tool, str(src), "-o", str(out), *extra, "--", "-std=c++17"]
    return [tool, str(src), "-o", str(out)]


def _cuda_root() -> str | None:
    nvcc = shutil.which("nvcc")
    return str(Path(nvcc).resolve().parent.parent) if nvcc else None
