"""The harness process of a candidate, on the parent's side: started before its GPU is free, handed its GPU and
library with the go-ahead, and its spares, started before any candidate asks for one.

What the child does is ksci/evaluate/harness/child.py; what the parent makes of its report is
ksci/evaluate/judge/classify.py. The child's environment is an allowlist (child_environment), and it starts in a sandbox
that hides the host's files (ksci.evaluate.sandbox.harness.confined_child): docs/threat-model.md.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ksci import PROJECT_ROOT
from ksci.devices import current_lease
from ksci.evaluate.options import EnvironmentProblem, EvaluationOptions
from ksci.evaluate.run.isolate import Child, ChildOutcome
from ksci.evaluate.run.visibility import gpu_visible, pin_device
from ksci.evaluate.sandbox.harness import confined_child
from ksci.problem.spec import Problem, problem_dirs


def run_harness(
    problem: Problem, library: str | None, options: EvaluationOptions, held_out: list[dict] | None = None
) -> ChildOutcome:
    with Harness(problem, library, options) as harness:
        return harness.run(options.device, held_out)


class Harness:
    """The isolated harness child of one run, which can be started before its GPU is free.

    `start` gets it going (Python, torch and the problem's reference load meanwhile); `run(device)` hands it its GPU
    and the candidate's library and waits for its outcome, the timeout counting from there. A GPU task starts it
    while it waits for a GPU (ksci.devices.any_free_gpu), so that a candidate's start-up overlaps the previous
    candidate's work on that GPU. With `spares`, `start` takes a child that was started before (SPARES) and keeps
    that many more starting for the next candidates of the same problem and options. Leaving the `with` block
    kills the child, run or not, and deletes its scratch folder."""

    def __init__(self, problem: Problem, library: str | None, options: EvaluationOptions, spares: int = 0) -> None:
        self.problem, self.library, self.options, self.spares = problem, library, options, spares
        self._started: _Started | None = None
        self._library_copy: str | None = None

    def start(self) -> None:
        """Have a child ready now (once); it waits for `run`."""
        if self._started is not None:
            return
        if not gpu_visible(self.options.target):
            raise EnvironmentProblem(
                f"no {self.options.target} GPU is visible on this machine: nothing can be run or timed"
            )
        self._started = SPARES.take(harness_request(self.problem, self.options), self.spares)
        if self.library is not None:  # the child loads its own copy: it is given no path into data/
            self._library_copy = str(shutil.copy(self.library, self._started.scratch / "kernel.so"))

    def run(self, device: str | None, held_out: list[dict] | None = None) -> ChildOutcome:
        """Give the child GPU `device` (an index among this process's GPUs; None: every one it may see), the
        candidate's library and the held-out shapes to verify it on too (ksci/problem/contract.py), and wait."""
        self.start()
        go: dict = {"env": pin_device(device, self.options.target)} if device is not None else {}
        if self.library is not None:
            go["library"] = self._library_copy
        if self.options.race:
            go["race"] = dict(self.options.race)
        if held_out:  # with the go-ahead, never in the request file a spare is started with
            go["held_out"] = held_out
        # Under any_free_gpu: the child times only once earlier runs on the GPU have exited, and hands the GPU over
        # at its result (ksci.devices.Lease).
        return self._started.child.run(self.options.timeout_s, go, current_lease(device))

    def close(self) -> None:
        if self._started is not None:
            self._started.close()
        self._started = None

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class _Started:
    """A harness child waiting for its go-ahead, and the scratch folder it runs in (its HOME and TMPDIR)."""

    child: Child
    folder: tempfile.TemporaryDirectory

    @property
    def scratch(self) -> Path:
        return Path(self.folder.name)

    def close(self) -> None:
        self.child.close()
        self.folder.cleanup()


def harness_request(problem: Problem, options: EvaluationOptions) -> dict:
    """What a harness child is started with: everything but the candidate's library, which comes with the go-ahead."""
    return {
        "problem": problem.name,
        "target": options.target,
        "phases": list(options.phases),
        "time_baselines": options.time_baselines,
        "policy": options.policy,
        "tests": list(options.tests or ()),
        "benchmarks": list(options.benchmarks or ()),
        "timeout_s": options.timeout_s,
    }


def _start_child(request: dict) -> _Started:
    folder = tempfile.TemporaryDirectory(prefix="ksci-child-")
    scratch = Path(folder.name)
    path = scratch / "request.json"
    path.write_text(json.dumps(request))
    env = child_environment(scratch)
    try:
        # In its sandbox (ksci.evaluate.sandbox.harness): it sees its scratch folder, the Python it runs and the
        # problem files, not the host's.
        argv = confined_child([sys.executable, "-m", "ksci.evaluate.harness.child", str(path)], scratch, env)
        return _Started(Child(argv, env=env, cwd=scratch), folder)
    except BaseException:
        folder.cleanup()
        raise


class SpareHarnesses:
    """Harness children started before any candidate asks for one, by request (problem and evaluation options).

    Every child still runs one candidate only; a spare is one whose start (Python, torch, the reference: 3.5 s,
    and up to 7 s on a host busy compiling) is over before a candidate needs it, where a child started when the
    candidate is compiled and near the front of the GPU queue can still be starting when its GPU frees up. A spare
    waits for its go-ahead on stdin and exits once that closes, so spares die with this process whatever ends it;
    `close` ends them sooner (the evolve flow does, when it finishes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, list[_Started]] = {}

    def take(self, request: dict, spares: int) -> _Started:
        """A started child for `request` (a spare if there is one), leaving `spares` more starting or ready."""
        with self._lock:
            ready = self._ready.setdefault(_key(request), [])
            taken = ready.pop(0) if ready else None
        self.fill(request, spares)
        return taken if taken is not None else _start_child(request)

    def fill(self, request: dict, spares: int) -> None:
        """Start spares for `request` until `spares` of them are starting or ready."""
        with self._lock:
            ready = self._ready.setdefault(_key(request), [])
            while len(ready) < spares:
                ready.append(_start_child(request))

    def ready(self, request: dict) -> int:
        """How many spares for `request` are starting or waiting."""
        with self._lock:
            return len(self._ready.get(_key(request), []))

    def close(self) -> int:
        """End every spare; returns how many there were."""
        with self._lock:
            every = [started for ready in self._ready.values() for started in ready]
            self._ready.clear()
        for started in every:
            started.close()
        return len(every)


def _key(request: dict) -> str:
    return json.dumps(request, sort_keys=True)


SPARES = SpareHarnesses()


def child_environment(scratch: Path) -> dict[str, str]:
    """The harness child's whole environment, from an allowlist: no API keys, no Prefect settings, no proxies.

    Kept: the search paths, the GPU runtime's device selection and settings, the locale; HOME and TMPDIR point
    into the scratch folder, so caches the runtime writes (e.g. ~/.nv) land there and vanish with it.
    """
    env = {name: value for name, value in os.environ.items() if _allowed(name)}
    env.update(
        KSCI_KERNELS_DIR=os.pathsep.join(str(d) for d in problem_dirs()),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        HOME=str(scratch),
        TMPDIR=str(scratch),
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    return env  # the GPU it may use comes with the go-ahead (Harness.run), once its slot is taken


CHILD_ENV_NAMES = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}
CHILD_ENV_PREFIXES = ("CUDA_", "HIP_", "ROCR_", "HSA_", "NVIDIA_", "ROCM_", "HCC_", "AMD_")
_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


def _allowed(name: str) -> bool:
    if any(hint in name.upper() for hint in _SECRET_HINTS):
        return False  # never, whatever its prefix (e.g. a CUDA_..._TOKEN someone invented)
    return name in CHILD_ENV_NAMES or name.startswith(CHILD_ENV_PREFIXES)
