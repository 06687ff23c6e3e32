"""The profile stage as plain functions: build a source the way the evaluation does, pick the shape, profile it.

`ksci profile` and the loop's profile task (tasks/profile.py) both call profile_source. A source that does not
compile gives a ProfileResult that says so, like every other reason for no profile.
"""

from __future__ import annotations

from pathlib import Path

from ksci.evaluate.host_stages import compile_candidate, prepare
from ksci.evaluate.options import EvaluationOptions
from ksci.problem.spec import Problem, shape_key
from ksci.profile.result import ProfileResult
from ksci.profile.run import TOOL_OF_TARGET, ProfileRequest, find_profiler, profile_library


def default_shape(problem: Problem) -> dict:
    """The representative shape: the benchmark with the most work (flops; the last listed when not counted)."""
    flops = problem.benchmark_flops()
    if any(f is not None for f in flops):
        return dict(max(zip(problem.benchmarks, flops, strict=True), key=lambda pair: pair[1] or 0.0)[0])
    return dict(problem.benchmarks[-1])


def chosen_shape(problem: Problem, wanted: str | None) -> dict | str:
    """The benchmark shape named by `wanted` (its key as ksci prints it, e.g. '6144x4608x7168', or the first key
    that contains it), the default when None; a string saying why when no shape matches."""
    if wanted is None:
        return default_shape(problem)
    needle = wanted.replace(" ", "")
    keys = [shape_key(s).replace(" ", "") for s in problem.benchmarks]
    for match in (lambda key: key == needle, lambda key: needle in key):
        for shape, key in zip(problem.benchmarks, keys, strict=True):
            if match(key):
                return dict(shape)
    keys = "; ".join(shape_key(s) for s in problem.benchmarks)
    return f"no benchmark shape of {problem.name} matches {wanted!r} (shapes: {keys})"


def profile_source(
    problem: Problem,
    source: str,
    options: EvaluationOptions,
    shape: dict,
    timeout_s: float = 300.0,
    keep_dir: Path | None = None,
) -> ProfileResult:
    """Compile `source` as the evaluation does (screen, sandboxed compiler, library check), then profile it."""
    tool = TOOL_OF_TARGET[options.target]
    if find_profiler(options.target) is None:  # nothing to compile for
        return ProfileResult(False, tool, why=f"{tool} is not installed on this host", shape=shape)
    prepared = prepare(problem, source, options.target)
    if not prepared.ok:
        return ProfileResult(False, tool, why=f"not compiled: {prepared.note}", shape=shape)
    compiled = compile_candidate(prepared.source, options)
    if not compiled.ok or not compiled.library:
        first = (compiled.rejected or compiled.log.strip() or "compile failed").splitlines()[0][:300]
        return ProfileResult(False, tool, why=f"not compiled: {first}", shape=shape)
    kernels = tuple(r.name.split("(")[0] for r in compiled.resources if r.name)
    request = ProfileRequest(
        problem.name, compiled.library, shape, options.target, kernels, options.device, timeout_s,
        keep_dir=str(keep_dir) if keep_dir else None,
    )  # fmt: skip
    return profile_library(request)
