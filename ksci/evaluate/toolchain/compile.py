"""Compile a kernel source to a shared library, with a content-addressed cache.

The cache key is the exact source text plus the whole compiler command line (the toolchain's own flags, the extra
flags and the arch, with placeholder paths) and the toolchain's version, so a new compiler or new default flags
are not trusted with old builds. The source is not normalised: what a compiler ignores is less than it seems. A
`//` comment ending in a backslash comments out the next line too (lines are spliced before comments are
removed), a newline ends a preprocessor directive, and `__LINE__` sees every line, so a key that dropped comments
or collapsed whitespace gave one library to two different programs. The same key (`source_hash`) names the
candidate in the lineage (`ksci.lineage.store.candidate_id_of`), so two sources that differ only in comments are two
candidates there too; each was compiled and measured as written.

The compiler's messages name the source as `kernel.cu:8` (or `kernel.hip:8`), not by the cache's work folder: a
path that changes with every build would make two logs of one program differ and means nothing to the reader.
Whoever knows the file the source came from names it (`compile_source(source_name=...)`, `name_source`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from ksci.evaluate.results import CompileResult, KernelResources
from ksci.evaluate.run.isolate import run_in_group
from ksci.evaluate.sandbox.bounds import compile_overflow, limit, with_file_size_limit
from ksci.evaluate.sandbox.compiler import sandboxed
from ksci.evaluate.toolchain.sass import (
    SassError,
    SassToolsMissing,
    checked_listing,
    find_sass_tools,
    interleave_ffma,
    requested_sixteenths,
)
from ksci.evaluate.toolchain.toolchains import Toolchain, demangle_names
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT

COMPILE_TIMEOUT_S = 300
# Part of the cache key of sources that ask for a SASS edit (ksci.evaluate.toolchain.sass): a new edit rule is a new build.
SASS_EDIT_VERSION = "interleave-ffma 1"
# The compiled source as a compiler names it: before a line number, `/x/.key-abc/kernel.cu(8)` (nvcc),
# `/x/.key-abc/kernel.hip:47:47` (clang), or by its whole path in quotes (nvcc's `1 error detected in the
# compilation of "/x/.key-abc/kernel.cu"`); the folder is the cache's work folder, or wherever a sandbox put it.
_COMPILED_SOURCE = re.compile(
    r"(?<![\w.])(?:/[^\s:'\"()]*)?/?(kernel\.(?:cu|hip))(?=[:(]\d)|(?<=\")(?:/[^\s\"]*/)?(kernel\.(?:cu|hip))(?=\")"
)


def source_hash(source: str) -> str:
    """The SHA-256 of the exact source text: two sources share it only when they are the same program text."""
    return hashlib.sha256(source.encode()).hexdigest()


def cache_key(source: str, toolchain: Toolchain, arch: str, flags: tuple[str, ...]) -> str:
    suffix = SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[toolchain.target]]
    command = toolchain.command(f"kernel{suffix}", "kernel.so", arch, flags)  # the paths compile_source uses
    material = "\0".join([source_hash(source), toolchain.target, toolchain.version, arch, *command])
    if toolchain.target == "cuda" and "interleave-ffma" in source:
        material += "\0" + SASS_EDIT_VERSION
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def compile_source(
    source: str,
    toolchain: Toolchain,
    arch: str,
    cache_dir: Path,
    flags: tuple[str, ...] = (),
    timeout_s: float = COMPILE_TIMEOUT_S,
    source_name: str | None = None,
) -> CompileResult:
    """Build `source` into `<cache_dir>/<key>/kernel.so`; a hit returns the stored result (cached=True).

    `source_name`: the file the source came from, for the compiler's messages (default `kernel.cu`/`kernel.hip`)."""
    key = cache_key(source, toolchain, arch, flags)
    entry = cache_dir / key
    if (entry / "result.json").is_file():
        return name_source(_load_cached(entry), source_name)
    cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_dir))
    src = work / f"kernel{SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[toolchain.target]]}"
    src.write_text(source)
    command = toolchain.command(str(src), str(work / "kernel.so"), arch, flags)
    result = _run_compiler(command, toolchain, arch, work, timeout_s)
    cacheable = not (result.ok and toolchain.target == "cuda") or _edit_sass(result, source, work, toolchain, timeout_s)
    result.source_hash = source_hash(source)
    result.log = _COMPILED_SOURCE.sub(_bare_name, result.log)  # stored without the work folder, which is renamed below
    overflow = compile_overflow(work, result.log)  # ksci.evaluate.sandbox.bounds
    if overflow:  # not cached either: nothing oversized stays, and a raised limit builds it again
        result.ok, result.log = False, f"error: {overflow}\n{result.log}"  # the first error line: the verdict's
    if overflow or not cacheable:  # the host lacks a tool: nothing is cached, so that a build after its install can
        shutil.rmtree(work, ignore_errors=True)  # succeed
        return name_source(result, source_name)
    (work / "result.json").write_text(json.dumps(asdict(result), indent=1))
    try:
        os.rename(work, entry)  # atomic publish; a concurrent twin may have won the race
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        return name_source(_load_cached(entry), source_name)
    result.library = str(entry / "kernel.so") if result.ok else None
    return name_source(result, source_name)


def name_source(result: CompileResult, source_name: str | None) -> CompileResult:
    """The result with the compiler's messages naming `source_name` (the user's file) where they name the
    compiled source; unchanged without one."""
    if source_name:
        result.log = with_source_name(result.log, source_name)
    return result


def _bare_name(match: re.Match) -> str:
    return match.group(1) or match.group(2)


def with_source_name(text: str, source_name: str) -> str:
    """`text` (a compile log, or a line of one) with `source_name` where it names the compiled source."""
    return _COMPILED_SOURCE.sub(lambda _: source_name, text)


def _run_compiler(command: list[str], toolchain: Toolchain, arch: str, work: Path, timeout_s: float) -> CompileResult:
    start = time.monotonic()
    try:
        # In a process group of its own (isolate.run_in_group): a terminal's Ctrl-C does not kill it into a cached
        # compile_error, and a stopping run raises StoppedByUser instead of recording a failure.
        confined = sandboxed(
            command, work, toolchain
        )  # ksci.evaluate.sandbox.compiler: the source reaches no host file
        proc = run_in_group(
            with_file_size_limit(confined, limit("KSCI_MAX_COMPILE_BYTES")),  # no file past it (sandbox/bounds.py)
            timeout_s,
            cwd=work,
            env=toolchain.environment(),
        )
        ok, log = proc.returncode == 0, (proc.stdout + proc.stderr)
    except subprocess.TimeoutExpired as exc:
        ok, log = False, f"compiler timed out after {exc.timeout:.0f} s\n{exc.stderr or ''}"
    ok = ok and (work / "kernel.so").is_file()
    return CompileResult(
        ok=ok,
        target=toolchain.target,
        arch=arch,
        toolchain=toolchain.version,
        command=command,
        log=log,
        resources=toolchain.parse_resources(log),
        seconds=round(time.monotonic() - start, 3),
    )


def _edit_sass(result: CompileResult, source: str, work: Path, toolchain: Toolchain, timeout_s: float) -> bool:
    """The SASS edit the source asks for (`// ksci: interleave-ffma N/16`), reported in the log. cuobjdump reads the
    library in the compiler's sandbox. A failure fails the build, as the library would not be the program the source
    describes. False when the result must not be cached: the host lacks cuobjdump or nvdisasm."""
    try:
        sixteenths = requested_sixteenths(source)
        if not sixteenths:
            return True
        tools = find_sass_tools(toolchain.compiler)
        library = work / "kernel.so"
        path = tools.search_path(os.environ.get("PATH", "/usr/bin:/bin"))
        command = sandboxed(tools.command(library), work, toolchain, tools.paths(), path, proc=True)
        listing = checked_listing(run_in_group(command, timeout_s, cwd=work, env=dict(os.environ, PATH=path)))
        result.log += "\n" + interleave_ffma(library, listing, sixteenths).describe(sixteenths) + "\n"
        return True
    except subprocess.TimeoutExpired:
        failure, cacheable = f"cuobjdump -sass took more than {timeout_s:.0f} s", True
    except (ValueError, SassError) as exc:
        failure, cacheable = str(exc), not isinstance(exc, SassToolsMissing)
    result.ok = False
    result.log += f"\nSASS edit failed: {failure}\n"
    return cacheable


def _load_cached(entry: Path) -> CompileResult:
    data = json.loads((entry / "result.json").read_text())
    # Entries stored before the log named the source as kernel.cu and before kernel names were demangled.
    data["resources"] = demangle_names([KernelResources(**r) for r in data["resources"]])
    data["log"] = _COMPILED_SOURCE.sub(_bare_name, data["log"])
    result = CompileResult(**data)
    result.library = str(entry / "kernel.so") if result.ok else None
    result.cached = True
    return result
