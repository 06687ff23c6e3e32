"""Edit the scheduling hints of long FFMA runs in a built CUDA library (FFMA interleaving, after DeepGEMM).

A block-scaled FP8 GEMM promotes its tensor-core partial sums in fp32 once per 128-wide K block: a run of 48-64 FFMAs
a warp that the tensor pipe should overlap with the other warpgroups' wgmmas. ptxas emits such runs in pairs that
share a scale operand: the first FFMA of a pair sets an operand-reuse flag and the control bit that keeps the warp
scheduler on that warp, so that the second reads the operand from the reuse cache. DeepGEMM found (its README, "FFMA
SASS interleaving") that clearing the reuse flags and that bit on part of each run lets the schedulers issue other
warps' instructions (the wgmmas) between the FFMAs, 10 %+ faster on some of its shapes with NVCC 12.3-12.8; it retired
the edit when NVCC 12.9 began to interleave by itself (the every-other-FFMA pattern above is nvcc 13's). Edited further
here, the Hopper FP8 templates' three-consumer points lost 3 % and some two-consumer points on small K gained 5-7 %
(H200, 2026-11-29; kernels/fp8_gemm_kmajor/knowledge.md), so it is a tuning choice. Nothing in CUDA C or PTX sets these
bits, so this module edits the binary: `cuobjdump -sass` lists the instructions with their 128-bit encodings,
runs of at least MIN_RUN FFMAs are found per function, and in the first `sixteenths`/16 of each run every FFMA gets
the encoding of an FFMA without reuse (reuse flags and that bit cleared). Those bits change neither the operands nor
the result: a cleared reuse flag makes the next instruction read its operand from the register file.

A source asks for it with a line `// ksci: interleave-ffma N/16` (N from 1 to 16), which the compile step reads
(`requested_sixteenths`); the templates emit it from a declared parameter, so the tuner chooses it per shape.

The encodings are found in the library by their bytes (16 per instruction: the low then the high 64-bit word, little
endian), the whole run at once; a run found nowhere (a compressed fat binary) is an error, not a silent no-op.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MIN_RUN = 16  # shorter FFMA runs are left as ptxas wrote them
# Bits of an instruction's high 64-bit word (sm_70 and later): the operand-reuse flags (bits 58-61) and the bit ptxas
# sets to hold the scheduler on the warp for the next instruction (45). An FFMA without reuse has both clear.
REUSE_BITS = 0xF << 58
HOLD_BIT = 1 << 45
_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*ksci:[ \t]*interleave-ffma[ \t]+(\d+)/16[ \t]*$", re.MULTILINE)
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);\s*/\*\s*(0x[0-9a-f]{16})\s*\*/")
_HIGH_WORD = re.compile(r"^\s*/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$")
_OPCODE = re.compile(r"^(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


class SassError(RuntimeError):
    """The library could not be edited as asked: an unreadable listing, a run not found in it."""


class SassToolsMissing(SassError):
    """No cuobjdump or nvdisasm here: the host's problem, not the source's (so no build result is cached)."""


@dataclass(frozen=True)
class Instruction:
    offset: int  # in its function, as cuobjdump prints it
    text: str  # e.g. "FFMA R132, R25, R135.reuse, R132"
    low: int
    high: int

    @property
    def opcode(self) -> str:
        match = _OPCODE.match(self.text)
        return match.group(1) if match else ""

    def encoding(self) -> bytes:
        return self.low.to_bytes(8, "little") + self.high.to_bytes(8, "little")


@dataclass(frozen=True)
class InterleaveReport:
    runs: int  # FFMA runs of at least MIN_RUN instructions
    ffmas: int  # FFMAs in those runs
    changed: int  # FFMAs whose encoding changed

    def describe(self, sixteenths: int) -> str:
        return (
            f"interleave-ffma {sixteenths}/16: {self.changed} of the {self.ffmas} FFMAs in {self.runs} runs of at "
            f"least {MIN_RUN} lost their reuse flags and may yield"
        )


def requested_sixteenths(source: str) -> int:
    """N of the source's `// ksci: interleave-ffma N/16` line, 0 without one; a bad N raises ValueError."""
    found = _DIRECTIVE.findall(source)
    if not found:
        return 0
    values = {int(n) for n in found}
    if len(values) > 1 or not 1 <= min(values) <= 16:
        raise ValueError(f"`// ksci: interleave-ffma N/16` wants one N from 1 to 16, found {sorted(values)}")
    return values.pop()


def parse_listing(listing: str) -> list[list[Instruction]]:
    """The instructions of each function of a `cuobjdump -sass` listing, in order."""
    functions: list[list[Instruction]] = []
    lines = listing.splitlines()
    for i, line in enumerate(lines):
        if "Function :" in line:
            functions.append([])
            continue
        match = _INSTRUCTION.search(line)
        if not match or not functions:
            continue
        high = _HIGH_WORD.match(lines[i + 1]) if i + 1 < len(lines) else None
        if high is None:
            raise SassError(f"no high word after the instruction at {match.group(1)}: {line.strip()}")
        offset, text, low = int(match.group(1), 16), match.group(2).strip(), int(match.group(3), 16)
        functions[-1].append(Instruction(offset, text, low, int(high.group(1), 16)))
    return functions


def ffma_runs(instructions: list[Instruction], min_run: int = MIN_RUN) -> list[list[Instruction]]:
    """The runs of at least `min_run` consecutive FFMAs (predicated ones included)."""
    runs: list[list[Instruction]] = []
    current: list[Instruction] = []
    for instruction in [*instructions, None]:
        if instruction is not None and instruction.opcode == "FFMA":
            current.append(instruction)
            continue
        if len(current) >= min_run:
            runs.append(current)
        current = []
    return runs


def interleaved(run: list[Instruction], sixteenths: int) -> list[Instruction]:
    """`run` with the first sixteenths/16 of its FFMAs (rounded down) encoded without reuse flags or the hold bit."""
    cut = len(run) * sixteenths // 16
    edited = [
        Instruction(x.offset, x.text.replace(".reuse", ""), x.low, x.high & ~(REUSE_BITS | HOLD_BIT)) for x in run[:cut]
    ]
    return edited + run[cut:]


def edit_library(data: bytearray, listing: str, sixteenths: int) -> InterleaveReport:
    """Apply `interleaved` to every long FFMA run of `listing` (the library's own) in `data`, in place. Runs with the
    same bytes (the same code in two functions, or in two cubins) are edited wherever they are, once."""
    runs = [run for function in parse_listing(listing) for run in ffma_runs(function)]
    edits: dict[bytes, tuple[bytes, Instruction]] = {}
    changed = 0
    for run in runs:
        new_run = interleaved(run, sixteenths)
        changed += sum(a.high != b.high for a, b in zip(run, new_run, strict=True))
        old, new = (b"".join(x.encoding() for x in r) for r in (run, new_run))
        if old != new:
            edits.setdefault(old, (new, run[0]))
    for old, (new, first) in edits.items():
        at = data.find(old)
        if at < 0:
            raise SassError(
                f"the FFMA run at {first.offset:#x} ({len(old) // 16} instructions) is not in the library's bytes "
                "(a compressed fat binary?)"
            )
        while at >= 0:
            data[at : at + len(old)] = new
            at = data.find(old, at + len(new))
    return InterleaveReport(len(runs), sum(len(run) for run in runs), changed)


@dataclass(frozen=True)
class SassTools:
    """cuobjdump and the nvdisasm it runs (found beside it, or put first on its PATH)."""

    cuobjdump: str
    nvdisasm: str

    def command(self, library: Path) -> list[str]:
        return [self.cuobjdump, "-sass", str(library)]

    def paths(self) -> tuple[str, ...]:
        """The files the command runs (for a sandbox's read-only binds; their folders are bound whole)."""
        return tuple(dict.fromkeys(p for t in (self.cuobjdump, self.nvdisasm) for p in (t, os.path.realpath(t))))

    def search_path(self, path: str) -> str:
        """PATH for the command: `path` with nvdisasm's folder first."""
        return f"{Path(self.nvdisasm).parent}{os.pathsep}{path}"


def find_sass_tools(compiler: str) -> SassTools:
    """cuobjdump and nvdisasm: beside nvcc, on PATH, or from the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels
    (`nvidia/cu*/bin`); nvdisasm beside cuobjdump first. Raises SassToolsMissing naming what to install."""
    toolkit = Path(os.path.realpath(compiler)).parent
    cuobjdump = _beside(toolkit, "cuobjdump") or _which("cuobjdump") or _from_wheel("cuobjdump")
    nvdisasm = cuobjdump and (
        _beside(Path(cuobjdump).parent, "nvdisasm")
        or _beside(toolkit, "nvdisasm")
        or _which("nvdisasm")
        or _from_wheel("nvdisasm")
    )
    if not (cuobjdump and nvdisasm):
        raise SassToolsMissing(
            "`// ksci: interleave-ffma` needs cuobjdump and nvdisasm: install the CUDA toolkit's, or "
            "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"
        )
    return SassTools(cuobjdump, nvdisasm)


_which = shutil.which  # (tests replace it to see the message without the tools)


def _beside(folder: Path, tool: str) -> str | None:
    return str(folder / tool) if (folder / tool).is_file() else None


def _from_wheel(tool: str) -> str | None:
    try:
        import nvidia  # the namespace package the NVIDIA CUDA wheels install into
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for candidate in sorted(Path(root).glob(f"cu*/bin/{tool}"), reverse=True):
            if candidate.is_file():
                return str(candidate)
    return None


def sass_listing(library: Path, tools: SassTools, timeout_s: float = 120) -> str:
    """`cuobjdump -sass library`, run here as it is: for libraries of trusted sources (tests, benchmarks). ksci's
    compile step runs the same command in the compiler's sandbox (ksci.evaluate.toolchain.compile)."""
    env = dict(os.environ, PATH=tools.search_path(os.environ.get("PATH", "")))
    try:
        proc = subprocess.run(tools.command(library), capture_output=True, text=True, timeout=timeout_s, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SassError(f"cuobjdump -sass failed: {exc}") from exc
    return checked_listing(proc)


def checked_listing(proc: subprocess.CompletedProcess) -> str:
    """The listing of a finished `cuobjdump -sass`, or SassError with what it said."""
    if proc.returncode != 0:
        raise SassError(f"cuobjdump -sass failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def interleave_ffma(library: Path, listing: str, sixteenths: int) -> InterleaveReport:
    """Edit `library` in place (see the module's docstring) from its own `cuobjdump -sass` listing."""
    data = bytearray(library.read_bytes())
    report = edit_library(data, listing, sixteenths)
    library.write_bytes(bytes(data))
    return report
