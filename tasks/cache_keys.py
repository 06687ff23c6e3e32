"""The parts of the tasks' cache keys that are not their inputs (compile, verify and benchmark, render, compose,
hipify, a proposer's step).

Prefect keys a task on its inputs and its own source (INPUTS + TASK_SOURCE). A verdict also depends on code and
files that are no input: the harness that verifies and times, the problem's spec and reference, the GPU and its
driver (the backend's identity, ksci/backends/); a compile on the screen, the library check and the toolchain. Left out of the key, `ksci evolve --run RUN`
replayed verdicts that an older harness gave (an `ok` a newer one refuses). The GPU ids (`gpus`) are left out on
purpose: which free GPU of the same host ran a candidate does not change its verdict. Likewise a rendered or
composed source depends on the problem's template files, and a generation's proposals on the proposer's code and
the problem's spec: without them in the key, a rerun after a template changed replayed the old source under the
new template's name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect.cache_policies import INPUTS, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext

from ksci.backends import backend_of
from ksci.evaluate.toolchain.hipify import find_hipify
from ksci.problem.spec import problem_root

KSCI = Path(__file__).resolve().parent.parent / "ksci"
# Code is keyed by folder (ksci's packages by stage), so that a file added to or moved into a keyed folder is in
# the key without a list to update; every pattern must match a file (code_hash), and tests/test_cache_keys.py
# checks that each does.
# What decides a verdict once the library exists: the evaluation (screen, harness, report schema, timing rules, classification),
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


@dataclass  # pass names= by keyword: CachePolicy's own fields come first, a positional tuple is its key_storage
class SetupFields(CachePolicy):
    """Keys a task on the named fields of its EvaluationSetup (`setup`), not on the rest: not on the GPU ids
    (which free GPU of the same host ran a candidate does not change its verdict) nor on the store."""

    names: tuple[str, ...] = ()

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        setup = inputs["setup"]
        return _digest(*(f"{name}={getattr(setup, name)!r}" for name in self.names))


class VerdictCode(CachePolicy):
    """Keys a GPU task (a candidate's verify and benchmark, a generation's baselines) on the harness's code, the
    problem's files and its backend's identity (this host's GPU models and drivers, or the simulator's recording)."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        setup = inputs["setup"]
        return _digest(harness_code_hash(), problem_hash(setup.problem), backend_of(setup).identity)


class CompileCode(CachePolicy):
    """Keys a compile task on the screen's, the library check's and the compile step's code and its backend's
    compiler (the toolchain's version and command line)."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        setup = inputs["setup"]
        return _digest(compile_code_hash(), backend_of(setup).compiler_identity(setup.arch))


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
    """Keys a proposer's cached step (tasks/proposing.py: proposer_step) on the proposers' code and the problem's templates and spec."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str:
        return _digest(proposer_code_hash(), template_hash(inputs["problem"]))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# The inputs besides the setup, and of the setup what the step's result depends on (the backend, through
# `simulate`; its identity comes with the code policies). The GPU ids are no part of a verdict: a rerun on other
# GPUs of the same host reuses every verdict; the store is no part of any result.
VERDICT_CACHE = (
    INPUTS - "setup" + TASK_SOURCE + SetupFields(names=("problem", "target", "arch", "simulate")) + VerdictCode()
)
COMPILE_CACHE = INPUTS - "setup" + TASK_SOURCE + SetupFields(names=("target", "arch", "simulate")) + CompileCode()
HIPIFY_CACHE = INPUTS - "setup" + TASK_SOURCE + SetupFields(names=("problem", "target")) + HipifyCode()
RENDER_CACHE = INPUTS + TASK_SOURCE + TemplateCode()
PROPOSAL_CACHE = INPUTS + TASK_SOURCE + ProposerCode()
