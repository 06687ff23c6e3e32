"""The profile stage as a Prefect task: the Base the selector chose each generation (and the run's best) profiled on
one shape, on the same GPU lock as timing (ksci.devices), with a time limit and a cache key of its own.

The key is the source's hash, the problem, the target, the shape, the GPU it was timed on and the profiler's version
line: a new ncu or another GPU profiles again; nothing else does. A run without a profile (no profiler, no
permission, a timeout) is a value in the digest ("no profile: why"); inside the task it raises NoProfile, so that
Prefect caches no failure and a rerun after fixing the permission profiles. profile_step gives the proposers'
Steps.profile: (source, candidate_id) -> the digest, recorded in the run's store (ksci.profile.store);
profile_best profiles the run's best kernel once, at the end of the evolution (flows/evolve.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable

from prefect import task

from ksci.devices import GPU_PRIORITY, any_free_gpu
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.setup import EvaluationSetup
from ksci.evaluate.toolchain.compile import source_hash
from ksci.lineage.store import LineageStore
from ksci.problem.roofline import peaks_for
from ksci.problem.spec import load_problem, shape_key
from ksci.profile.digest import digest
from ksci.profile.result import ProfileResult
from ksci.profile.run import TOOL_OF_TARGET, find_profiler, profiler_version
from ksci.profile.stage import default_shape, profile_source
from ksci.profile.standing import shape_standing
from ksci.profile.store import record_profile
from ksci.profile.view import best_row

PROFILE_TIMEOUT_S = 300.0


class NoProfile(RuntimeError):
    """Raised inside the task only, carrying the result, so that Prefect does not cache a failed profile."""

    def __init__(self, result: ProfileResult) -> None:
        super().__init__(result)
        self.result = result


@functools.cache
def _version(target: str) -> str:
    path = find_profiler(target)
    return profiler_version(path) if path else "none"


def profile_cache_key(context, parameters: dict) -> str:
    setup: EvaluationSetup = parameters["setup"]
    material = [
        source_hash(parameters["source"]), setup.problem, setup.target, json.dumps(parameters["shape"], sort_keys=True),
        parameters["gpu"], _version(setup.target),
    ]  # fmt: skip
    return "profile-" + hashlib.sha256("\0".join(material).encode()).hexdigest()[:32]


@task(name="profile", cache_key_fn=profile_cache_key, timeout_seconds=PROFILE_TIMEOUT_S + 120)
def profile_kernel(setup: EvaluationSetup, source: str, shape: dict, gpu: str) -> ProfileResult:
    """`gpu` (the name it was timed on) is part of the key only: the kernel runs on whichever GPU of the run is free."""
    with any_free_gpu(list(setup.gpus)) as device:
        options = EvaluationOptions(target=setup.target, arch=setup.arch, device=device)
        result = profile_source(load_problem(setup.problem), source, options, shape, PROFILE_TIMEOUT_S)
    if not result.ok:
        raise NoProfile(result)
    return result


def profile_step(setup: EvaluationSetup, run: str) -> Callable[[str, str], str]:
    """Steps.profile for a run: profile a candidate on the shape where it loses most to the vendor (the benchmark with
    the most work when that is not known), record it under the generation being proposed, give its digest."""

    def profile(source: str, candidate_id: str) -> str:
        return profile_and_record(setup, run, GPU_PRIORITY.get(), source, candidate_id, "base")

    return profile


def profile_best(setup: EvaluationSetup, run: str) -> str | None:
    """The run's best kernel profiled once, at the end of the evolution, recorded under the run's last generation
    as role "best" (the report shows it); None when no candidate passed (nothing to profile)."""
    store = LineageStore(setup.store_root)
    best = store.best(run)
    if best is None:
        return None
    source = store.read_source(best["source_path"])
    last = store.generations(run) - 1
    return profile_and_record(setup, run, last, source, str(best["candidate_id"]), "best")


def profile_and_record(
    setup: EvaluationSetup, run: str, generation: int, source: str, candidate_id: str, role: str
) -> str:
    """Profile one candidate (a simulated run has no kernel: that is the digest), record it, give its digest. A task
    that fails outside the profiler (its time limit, the GPU lock) is a "no profile" too: the run goes on."""
    tool = TOOL_OF_TARGET[setup.target]
    problem = load_problem(setup.problem)
    row = best_row(LineageStore(setup.store_root).read(run), candidate_id) or {}
    if setup.simulate is not None:
        result = ProfileResult(False, tool, why="a simulated run has no kernel to profile")
    else:
        standing = [s for s in shape_standing(problem, row) if s.vs_vendor]
        shape = next((dict(s) for s in problem.benchmarks if standing and shape_key(s) == standing[0].key), None)
        shape = shape or default_shape(problem)
        try:
            result = profile_kernel(setup, source, shape, str(row.get("gpu") or ""))
        except NoProfile as exc:
            result = exc.result
        except (TimeoutError, OSError, ValueError) as exc:
            why = f"the profile task failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            result = ProfileResult(False, tool, why=why, shape=shape)
    peaks = peaks_for(result.gpu or str(row.get("gpu") or ""))
    text = digest(result, peaks.bandwidth_tbs if peaks else None)
    record_profile(setup.store_root, run, generation, candidate_id, role, result, text)
    return text
