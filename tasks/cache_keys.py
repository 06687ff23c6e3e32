"""The parts of the tasks' cache keys that are not their inputs (compile, verify, benchmark, render, compose,
hipify, hypothesize).

Prefect keys a task on its inputs and its own source (INPUTS + TASK_SOURCE). A verdict also depends on code and
files that are no input: the harness that verifies and times, the problem's spec and reference, the GPU and its
driver; a compile on the screen, the library check and the toolchain. Left out of the key, `ksci evolve --run RUN`
replayed verdicts that an older harness gave (an `ok` a newer one refuses). The GPU ids (`gpus`) are left out on
purpose: which free GPU of the same host ran a candidate does not change its verdict. Likewise a rendered or
composed source depends on the problem's template files, and a generation's proposals on the proposer's code and
the problem's spec: without them in the key, a rerun after a template changed replayed the old source under the
new template's name.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

from prefect.cache_policies import INPUTS, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext

from ksci.evaluate.hipify import find_hipify
from ksci.evaluate.toolchain import ToolchainMissing, default_arch, find_toolchain
from ksci.problem.spec import problem_root

KSCI = Path(__file__).resolve().parent.parent / "ksci"
# Code is keyed by folder (ksci's packages by stage), so that a file added to or moved into a keyed folder is in
# the key without a list to update; every pattern must match a file (code_hash), and tests/test_cache_keys.py
# checks that each does.
# What decides a verdict once the library exists: the evaluation (screen, harness, protocol, classification),
# the backends, the problem code (spec, tolerances, roofline) and what an imported problem's reference.py runs.
HARNESS_CODE = ("evaluate/**/*.py", "backends/**/*.py", "problem/**/*.py", "importers/runtime.py")
# What decides a compile's result: the screen, the library check, the compile step and the toolchains.
COMPILE_CODE = ("evaluate/**/*.py", "backends/**/*.py")
PROBLEM_FILES = ("problem.yaml", "reference.py")
# What decides a rendered (or composed) source besides the point: the problem's templates and spec.
TEMPLATE_FILES = ("problem.yaml", "templates/**/*")
RENDER_CODE = ("problem/**/*.py",)
# What decides a converted source besides the source: the conversion's code (and which converters are here).
HIPIFY_CODE = ("evaluate/**/*.py", "problem/**/*.py")
# What decides a generation's proposals besides the population: the proposer's code.
PROPOSER_CODE = ("proposers/**/*.py", "problem/**/*.py")
CODE_KEYS = {
    "harness": HARNESS_CODE,
    "compile": COMPILE_CODE,
    "render": RENDER_CODE,
    "hipify": HIPIFY_CODE,
    "proposer": PROPOSER_CODE,
}


class UnmatchedPattern(RuntimeError):
    """A code pattern of a cache key matches no file: a folder was renamed without updating the key."""


def code_hash(patterns: tuple[str, ...]) -> str:
    """hash_files over ksci's own code; a pattern that matches nothing is an error, never silently dropped."""
    for pattern in patterns:
        if not any(p.is_file() for p in KSCI.glob(pattern)):
            raise UnmatchedPattern(f"cache key pattern ksci/{pattern} matches no file")
    return hash_files(KSCI, patterns)


def hash_files(root: Path, patterns: tuple[str, ...]) -> str:
    """SHA-256 over the names and bytes of the files matching `patterns` under `root` (missing ones skipped)."""
    digest = hashlib.sha256()
    for path in sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()}):
        digest.update(f"{path.relative_to(root)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def harness_code_hash() -> str:
    return code_hash(HARNESS_CODE)


def compile_code_hash() -> str:
    return code_hash(COMPILE_CODE)


def problem_hash(problem: str) -> str:
    return _problem_files_hash(problem, PROBLEM_FILES)


def render_code_hash() -> str:
    return code_hash(RENDER_CODE)


def proposer_code_hash() -> str:
    return code_hash(PROPOSER_CODE)


def template_hash(problem: str) -> str:
    return _problem_files_hash(problem, TEMPLATE_FILES)


def _problem_files_hash(problem: str, patterns: tuple[str, ...]) -> str:
    root = problem_root(problem)
    return hash_files(root, patterns) if root else "no such problem"


def gpu_identity(target: str, simulate: str | None) -> str:
    """The GPU model and driver of this host ("none" without a GPU); the recording's name when simulating."""
    if simulate is not None:  # by name: a test rewrites a recording's rows to stand for a GPU that came back
        return f"simulator:{Path(simulate).name if simulate else 'none'}"
    return _host_gpus(target)


@functools.cache
def _host_gpus(target: str) -> str:
    """Every visible GPU's model and driver, sorted and deduplicated (a candidate takes any of them)."""
    if target == "rocm":
        argv = ["rocm-smi", "--showproductname", "--showdriverversion", "--csv"]
    else:
        argv = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    if shutil.which(argv[0]) is None:
        return "none"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "none"
    return "; ".join(sorted({line.strip() for line in out.splitlines() if line.strip()})) or "none"


def toolchain_identity(target: str, arch: str | None, simulate: str | None) -> str:
    """The compiler's version and whole command line (the toolchain's own flags included)."""
    if simulate is not None:
        return "simulator"
    try:
        toolchain = find_toolchain(target)
    except ToolchainMissing:
        return "missing"  # the compile fails (not cached by Prefect); a later compiler gets a new key
    return "\0".join([toolchain.version, *toolchain.command("kernel", "kernel.so", arch or _default_arch(target))])


@functools.cache
def _default_arch(target: str) -> str:
    return default_arch(target)  # the GPU's own (asks nvidia-smi or rocminfo): once per process


class VerdictCode(CachePolicy):
    """Keys a verify or benchmark task on the harness's code, the problem's files and this host's GPUs."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        parts = [harness_code_hash(), problem_hash(inputs["problem"])]
        return _digest(*parts, gpu_identity(inputs["target"], inputs.get("simulate")))


class CompileCode(CachePolicy):
    """Keys a compile task on the screen's, the library check's and the compile step's code and the toolchain."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        toolchain = toolchain_identity(inputs["target"], inputs.get("arch"), inputs.get("simulate"))
        return _digest(compile_code_hash(), toolchain)


class TemplateCode(CachePolicy):
    """Keys a render or compose task on the problem's template files and the renderer's code."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        return _digest(render_code_hash(), template_hash(inputs["problem"]))


class HipifyCode(CachePolicy):
    """Keys the hipify task on the conversion's code and the converters found on this host."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        return _digest(code_hash(HIPIFY_CODE), *find_hipify())


class ProposerCode(CachePolicy):
    """Keys the hypothesize task on the proposer's code and the problem's templates and spec."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        return _digest(proposer_code_hash(), template_hash(inputs["problem"]))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# The GPU ids are no part of a verdict: a rerun on other GPUs of the same host reuses every verdict.
VERDICT_CACHE = INPUTS - "gpus" + TASK_SOURCE + VerdictCode()
COMPILE_CACHE = INPUTS + TASK_SOURCE + CompileCode()
RENDER_CACHE = INPUTS + TASK_SOURCE + TemplateCode()
HIPIFY_CACHE = INPUTS + TASK_SOURCE + HipifyCode()
PROPOSAL_CACHE = INPUTS + TASK_SOURCE + ProposerCode()
