"""The most a candidate's compile and harness child may write: every such limit is set here and nowhere else
(docs/threat-model.md, "Bounded outputs").

A source decides how big its compiler's outputs are (`asm(".fill 300000000,1,0")` in host code assembles into a
300 MB library in seconds), and a kernel's host code how much its harness child prints. Each limit may be changed
with the environment variable of its name, in bytes (the tests lower them to write a few MB only).

- KSCI_MAX_LIBRARY_BYTES: the compiled library (kernel.so). Over it the compile is a `compile_error` that names the
  limit, and nothing of it is kept in the compile cache.
- KSCI_MAX_COMPILE_BYTES: the compile's work folder, all its files together; also the most any one file that the
  compiler writes may hold (RLIMIT_FSIZE, set on the compiler's process tree, so that a write past it fails with
  EFBIG before the disk fills). Over it, the same `compile_error`.
- KSCI_MAX_HARNESS_OUTPUT_BYTES: what the harness child hands its parent: its stdout and stderr (one file, the same
  RLIMIT_FSIZE on the child) and its report pipe (the parent stops reading there). Over it the candidate is a
  `runtime_error` that names the limit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MIB = 1 << 20
DEFAULTS = {
    "KSCI_MAX_LIBRARY_BYTES": 64 * MIB,
    "KSCI_MAX_COMPILE_BYTES": 256 * MIB,  # the source, the library, result.json; one file at most this big
    "KSCI_MAX_HARNESS_OUTPUT_BYTES": 64 * MIB,  # also the child's own RLIMIT_FSIZE (sandbox/harness.py)
}
# Sets RLIMIT_FSIZE (soft and hard, never above the hard limit it had) and execs the command: Python's own startup
# ignores SIGXFSZ, and that carries across exec, so an oversized write fails with EFBIG instead of a core dump.
_SET_FSIZE = (
    "import os,resource,sys\n"
    "n=int(sys.argv[1]);h=resource.getrlimit(resource.RLIMIT_FSIZE)[1]\n"
    "n=n if h==resource.RLIM_INFINITY else min(n,h)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE,(n,n));os.execvp(sys.argv[2],sys.argv[2:])"
)


def limit(name: str) -> int:
    """The limit `name` (one of DEFAULTS) in bytes: its environment variable where set to a positive integer."""
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULTS[name]


def describe(name: str) -> str:
    return f"{_mib(limit(name))} ({name})"


def with_file_size_limit(argv: list[str], size: int) -> list[str]:
    """argv run with RLIMIT_FSIZE `size`: no file it (or any process it starts) writes grows past `size` bytes.
    Set by an exec'd wrapper rather than a preexec_fn, which is unsafe in the parent's threads."""
    return [sys.executable, "-I", "-S", "-c", _SET_FSIZE, str(size), *argv]


def compile_overflow(work: Path, log: str) -> str | None:
    """The line that says which limit a compile in `work` went past (its library, its folder, or a file the
    compiler could not write past RLIMIT_FSIZE: `File too large` in its log), else None."""
    library = work / "kernel.so"
    size = library.stat().st_size if library.is_file() else 0
    if size > limit("KSCI_MAX_LIBRARY_BYTES"):
        return f"the compiled library holds {_mib(size)}, over the limit of {describe('KSCI_MAX_LIBRARY_BYTES')}"
    total = sum(p.stat().st_size for p in work.rglob("*") if p.is_file() and not p.is_symlink())
    if total > limit("KSCI_MAX_COMPILE_BYTES") or "File too large" in log:
        return f"the compile wrote more than the limit of {describe('KSCI_MAX_COMPILE_BYTES')}"
    return None


def harness_overflow() -> str:
    return f"the harness child's output went past the limit of {describe('KSCI_MAX_HARNESS_OUTPUT_BYTES')}"


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"
