"""Run a profiler on a compiled candidate, one shape: the command built by ncu.py or rocprof.py, the runner under
it, the output parsed by the same module. Whatever goes wrong (no profiler installed, no permission to read the
counters, a timeout, nothing measured) comes back as ProfileResult(ok=False, why=...), never as an exception.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ksci import PROJECT_ROOT
from ksci.devices import current_lease
from ksci.profile import ncu, rocprof
from ksci.profile.result import ProfileResult

TOOL_OF_TARGET = {"cuda": "ncu", "rocm": "rocprofv3"}
PLACES = {
    "ncu": ("/usr/local/cuda*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"),
    "rocprofv3": ("/opt/rocm*/bin/rocprofv3",),
}
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ProfileRequest:
    """What to profile: a built library of `problem` on `shape`; `kernels` names its kernels (from the compiler's
    resource report) for a profiler that filters by name; `device` pins the GPU (an index this process may use)."""

    problem: str
    library: str
    shape: dict
    target: str = "cuda"
    kernels: tuple[str, ...] = ()
    device: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    calls: int = 3
    warmup: int = 2
    extra_env: dict = field(default_factory=dict)
    keep_dir: str | None = None  # where to copy the profiler's CSV (to record it as test data)


def find_profiler(target: str) -> str | None:
    """The profiler's path: on PATH first, then where CUDA or ROCm install it."""
    tool = TOOL_OF_TARGET[target]
    found = shutil.which(tool)
    if found:
        return found
    candidates = sorted(p for pattern in PLACES[tool] for p in glob.glob(pattern))
    return candidates[-1] if candidates else None


def profiler_version(path: str) -> str:
    """The profiler's version line (part of the profile cache's key), or '' when it does not say."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [line.strip() for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    versioned = [line for line in lines if "version" in line.lower()]
    return (versioned or lines or [""])[-1][:120]


def profile_library(request: ProfileRequest) -> ProfileResult:
    """Profile the library on the request's shape; the result says why when there is no profile."""
    tool = TOOL_OF_TARGET[request.target]
    path = find_profiler(request.target)
    if path is None:
        return ProfileResult(False, tool, why=f"{tool} is not installed on this host", shape=dict(request.shape))
    version = profiler_version(path)
    with tempfile.TemporaryDirectory(prefix="ksci-profile-") as work:
        return _profile_in(request, path, version, Path(work))


def _profile_in(request: ProfileRequest, path: str, version: str, work: Path) -> ProfileResult:
    tool = TOOL_OF_TARGET[request.target]
    request_path = work / "request.json"
    fields = ("problem", "library", "shape", "target", "calls", "warmup")
    request_path.write_text(json.dumps({name: getattr(request, name) for name in fields}))
    runner = [sys.executable, "-m", "ksci.profile.runner", str(request_path)]
    if tool == "ncu":
        command = ncu.ncu_command(path, runner, work)
    else:
        command = rocprof.rocprof_command(path, runner, work, request.kernels)
    started = time.monotonic()
    base = ProfileResult(False, tool, version, shape=dict(request.shape), command=tuple(command))
    if (lease := current_lease(request.device)) is not None:  # the counters see this GPU's work alone
        lease.wait_for_exits(started + request.timeout_s)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=request.timeout_s, env=_env(request), cwd=PROJECT_ROOT
        )
    except subprocess.TimeoutExpired:
        return _with(base, why=f"{tool} ran past its {request.timeout_s:g} s limit", seconds=time.monotonic() - started)
    except OSError as exc:
        return _with(base, why=f"{tool} could not start: {exc}", seconds=time.monotonic() - started)
    if request.keep_dir:
        _keep(work, Path(request.keep_dir), done.stdout + done.stderr, request, command)
    return parse_output(base, work, done.stdout + done.stderr, done.returncode, time.monotonic() - started)


def _keep(work: Path, keep_dir: Path, output: str, request: ProfileRequest, command: list[str]) -> None:
    """The profiler's CSV files and its console output, copied for the record; with them what was profiled: the
    runner's request (request.json, as the runner read it), the library's absolute path (library.txt) and the
    profiler's command line (command.txt), so that a hand-run profiler (benchmarks/profile_check.sh) runs exactly
    the same library on the same request."""
    keep_dir.mkdir(parents=True, exist_ok=True)
    for path in [work / ncu.LOG_NAME, *rocprof.collected_files(work), work / "request.json", work / "device.json"]:
        if path.is_file():
            shutil.copy(path, keep_dir / path.name)
    (keep_dir / "profiler_output.txt").write_text(output)
    (keep_dir / "library.txt").write_text(str((PROJECT_ROOT / request.library).resolve()) + "\n")
    (keep_dir / "command.txt").write_text(shlex.join(command) + "\n")


def parse_output(base: ProfileResult, work: Path, output: str, returncode: int, seconds: float) -> ProfileResult:
    """The profile in `work` (ncu's log file, rocprofv3's pass folders), or why there is none."""
    if base.tool == "ncu":
        log = (work / ncu.LOG_NAME).read_text(errors="replace") if (work / ncu.LOG_NAME).is_file() else ""
        failure = ncu.failure_in(output + log)
        kernels = ncu.kernel_profiles(ncu.read_launches(log))
    else:
        failure = rocprof.failure_in(output)
        kernels = rocprof.kernel_profiles(rocprof.read_rows(rocprof.collected_files(work)))
    device = json.loads((work / "device.json").read_text()) if (work / "device.json").is_file() else {}
    if not kernels:
        last = (output.strip().splitlines() or ["no output"])[-1][:300]
        why = failure or f"{base.tool} measured no kernel (exit {returncode}): {last}"
        return _with(base, why=why, seconds=seconds, gpu=device.get("gpu", ""))
    return _with(base, ok=True, kernels=kernels, seconds=seconds, gpu=device.get("gpu", ""))


def _with(base: ProfileResult, **changes) -> ProfileResult:
    return replace(base, **changes)


def _env(request: ProfileRequest) -> dict:
    """The runner's environment: C numbers in the CSV, this project importable, the GPU pinned."""
    env = {**os.environ, "LC_ALL": "C", **request.extra_env}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    if request.device is not None:
        env["HIP_VISIBLE_DEVICES" if request.target == "rocm" else "CUDA_VISIBLE_DEVICES"] = str(request.device)
    return env
