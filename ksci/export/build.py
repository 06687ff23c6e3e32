"""Build the exported package's libraries: the candidate's source compiled for each architecture by the evaluation's
own path (ksci.evaluate.host_stages: prepare (entry point, hipify), the static screen, the sandboxed compiler with the
toolchain's flags, the library check), one shared library per architecture.

The simulator's stand-in (ksci's CPU tests) builds nothing: its package computes with reference.py and says so."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ksci.evaluate.host_stages import compile_candidate, first_error, prepare
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.toolchain.toolchains import ToolchainMissing, find_toolchain
from ksci.export.source import EXIT_ENVIRONMENT, EXIT_FAILED, ExportRefused
from ksci.problem.spec import Problem

STAND_IN = "test-stand-in"


@dataclass(frozen=True)
class Built:
    """The libraries (architecture -> built file), the source the compiler got, and the compiler that built them."""

    libraries: dict[str, Path]
    compiled_source: str
    toolchain: str
    flags: str


def build_libraries(problem: Problem, source: str, target: str, archs: list[str]) -> Built:
    """One library per architecture; ExportRefused (rc 3) without the target's compiler, naming it, and (rc 1) for
    a source that does not build for one of them, with the compiler's first error."""
    try:
        toolchain = find_toolchain(target, archs[0] if target == "rocm" else None)
    except ToolchainMissing as exc:
        raise ExportRefused(f"cannot build for {target} {', '.join(archs)}: {exc}", EXIT_ENVIRONMENT) from None
    prepared = prepare(problem, source, target)
    if not prepared.ok:
        raise ExportRefused(f"cannot build the candidate for {target}: {prepared.note}", EXIT_FAILED)
    libraries = {}
    for arch in archs:
        try:
            compiled = compile_candidate(prepared.source, EvaluationOptions(target=target, arch=arch))
        except ToolchainMissing as exc:
            raise ExportRefused(f"cannot build for {target} {arch}: {exc}", EXIT_ENVIRONMENT) from None
        if not compiled.ok or not compiled.library:
            why = compiled.rejected or first_error(compiled.log)
            raise ExportRefused(f"the candidate does not build for {arch}: {why}", EXIT_FAILED)
        libraries[arch] = Path(compiled.library)
    flags = " ".join(toolchain.command("kernel.cu" if target == "cuda" else "kernel.hip", "kernel.so", archs[0])[1:])
    return Built(libraries, prepared.source, toolchain.version, flags)


def stand_in(source: str) -> Built:
    """No library: the package's op computes with reference.py (named as a test stand-in everywhere it shows)."""
    return Built({}, source, STAND_IN, "none (test stand-in)")


def copy_libraries(built: Built, lib_dir: Path) -> dict[str, str]:
    """The libraries copied into the package (lib/kernel_<arch>.so); spec.json's `libraries`."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    names = {}
    for arch, path in built.libraries.items():
        name = f"kernel_{arch}.so"
        shutil.copyfile(path, lib_dir / name)
        names[arch] = f"lib/{name}"
    return names
