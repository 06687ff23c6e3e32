"""The problems of tests/data/ in KernelBench's and gpu-mode's formats, written for the importers' tests, with a
hand-written CUDA kernel for each that is correct and one that is wrong (`// expect: ...` on its first line).

Used by tests/test_imported_kernels.py, benchmarks/imported_problems.py and benchmarks/llm_imported_scripted.py.
"""

from __future__ import annotations

from pathlib import Path

from ksci import PROJECT_ROOT
from ksci.importers.common import ImportFailure
from ksci.importers.gpumode import import_gpumode
from ksci.importers.kernelbench import import_kernelbench

DATA = PROJECT_ROOT / "tests" / "data"
KERNELBENCH = sorted((DATA / "kernelbench").glob("*.py"))  # level-1 and level-2 kinds; errors/ holds the refusals
GPUMODE = [DATA / "gpumode" / "fp8_mm"]


def sources() -> dict[str, tuple[str, Path]]:
    """Problem name -> (format, what to import)."""
    found = {path.stem: ("kernelbench", path) for path in KERNELBENCH}
    found.update({path.name: ("gpumode", path) for path in GPUMODE})
    return found


def import_all(dest: Path) -> list[str]:
    """Import every test problem into `dest` (put it on the search path: KSCI_KERNELS_DIR); their names."""
    for fmt, path in sources().values():
        importer = import_kernelbench if fmt == "kernelbench" else import_gpumode
        result = importer(path, dest=dest)
        if isinstance(result, ImportFailure):
            raise RuntimeError(f"{path}: {result}")
    return sorted(sources())


def kernels(name: str) -> dict[str, Path]:
    """The problem's hand-written kernels: {"correct": ..., "wrong": ...}."""
    _fmt, path = sources()[name]
    folder = path.with_suffix("") if path.is_file() else path
    return {kind: folder / f"{kind}.cu" for kind in ("correct", "wrong")}


def expected(path: Path) -> str:
    """The verdict a kernel must get, from its first line (`// expect: ok`)."""
    return path.read_text().splitlines()[0].split("expect:")[-1].strip()
