"""Compile a kernel source to a shared library, with a content-addressed cache.

The cache key is the normalised source (comments and layout removed) plus the flags, the arch and the
toolchain's version, so a reformatted kernel is not rebuilt and a new compiler is not trusted with old builds.
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

from ksci.problem import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT
from ksci.results import CompileResult, KernelResources
from ksci.toolchain import Toolchain

COMPILE_TIMEOUT_S = 300

# String and character literals are kept as they are; comments are dropped.
_TOKENS = re.compile(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|(//[^\n]*|/\*.*?\*/)', re.S)
_SPACE = re.compile(r"\s+")
_LITERALS = re.compile(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')')


def normalise_source(source: str) -> str:
    """Remove comments and collapse whitespace outside string and character literals."""
    without_comments = _TOKENS.sub(lambda m: m.group(1) or " ", source)
    parts = _LITERALS.split(without_comments)  # odd indices are literals
    return "".join(p if i % 2 else _SPACE.sub(" ", p) for i, p in enumerate(parts)).strip()


def source_hash(source: str) -> str:
    return hashlib.sha256(normalise_source(source).encode()).hexdigest()


def cache_key(source: str, toolchain: Toolchain, arch: str, flags: tuple[str, ...]) -> str:
    material = "\0".join([source_hash(source), toolchain.target, toolchain.version, arch, *flags])
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def compile_source(
    source: str,
    toolchain: Toolchain,
    arch: str,
    cache_dir: Path,
    flags: tuple[str, ...] = (),
    timeout_s: float = COMPILE_TIMEOUT_S,
) -> CompileResult:
    """Build `source` into `<cache_dir>/<key>/kernel.so`; a hit returns the stored result (cached=True)."""
    key = cache_key(source, toolchain, arch, flags)
    entry = cache_dir / key
    if (entry / "result.json").is_file():
        return _load_cached(entry)
    cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_dir))
    src = work / f"kernel{SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[toolchain.target]]}"
    src.write_text(source)
    command = toolchain.command(str(src), str(work / "kernel.so"), arch, flags)
    result = _run_compiler(command, toolchain, arch, work, timeout_s)
    result.source_hash = source_hash(source)
    (work / "result.json").write_text(json.dumps(asdict(result), indent=1))
    try:
        os.rename(work, entry)  # atomic publish; a concurrent twin may have won the race
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        return _load_cached(entry)
    result.library = str(entry / "kernel.so") if result.ok else None
    return result


def _run_compiler(command: list[str], toolchain: Toolchain, arch: str, work: Path, timeout_s: float) -> CompileResult:
    start = time.monotonic()
    try:
        proc = subprocess.run(
            command, cwd=work, capture_output=True, text=True, env=toolchain.environment(), timeout=timeout_s
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


def _load_cached(entry: Path) -> CompileResult:
    data = json.loads((entry / "result.json").read_text())
    data["resources"] = [KernelResources(**r) for r in data["resources"]]
    result = CompileResult(**data)
    result.library = str(entry / "kernel.so") if result.ok else None
    result.cached = True
    return result
