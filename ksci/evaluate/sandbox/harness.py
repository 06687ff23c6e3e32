"""The harness child's confinement: the files it can see (set up before it starts, `confined_child`), then the
limits it puts on itself before it loads a candidate (resource limits, no network, no capabilities, the syscall
filter: `confine_self`).

The child starts inside the same kind of sandbox as the compiler (ksci/evaluate/sandbox/compiler.py): new user, mount, PID,
IPC and UTS namespaces and a root of bind mounts holding the system's software, the Python it runs (prefix,
site-packages), the project's `ksci` package and problem folders, read-only, its scratch folder writable, the GPU's
device files, /sys read-only and a /proc of its own PID namespace. /etc/passwd, /root (but the Python under it), the
home folder, the project's .env and data/ do not exist there, and every mount is locked read-only as bound (a
nested user namespace: ksci/evaluate/sandbox/enter.py). Its network is dropped by the child itself once the GPU
runtime is up (`drop_network`, which needs CAP_SYS_ADMIN in the sandbox's namespace), and only then does it drop
every capability and install the seccomp filter on all its threads (`confine_self`, ksci/evaluate/sandbox/confine.py): a
denied call from the candidate ends the child with a `denied` report naming the call. Where no sandbox can be made the child is not started (EnvironmentProblem, one
line) unless KSCI_UNSANDBOXED_HARNESS=1; a set-up that fails on a GPU host ends the child before it reports
"started", which the parent reports as "the harness did not start (exit 125): ksci sandbox: ...".

The limits are applied in the child rather than in a preexec_fn, because the parent may be a threaded Prefect
worker (where preexec_fn is unsafe) and because the child knows when the GPU runtime is up: every limit here was
chosen to leave CUDA and ROCm working (see docs/threat-model.md). Nothing here fails the run when the OS refuses
it; what was applied is reported in the fingerprint.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import resource
import site
import sys
from pathlib import Path

from ksci import PROJECT_ROOT
from ksci.evaluate.options import EnvironmentProblem
from ksci.evaluate.sandbox import confine
from ksci.evaluate.sandbox.bounds import DEFAULTS as _BOUNDS
from ksci.evaluate.sandbox.compiler import (
    DEVICES,
    STATUS_VARIABLE,
    Root,
    SandboxStatus,
    sandbox_status,
    toolchain_paths,
    wrap,
)
from ksci.problem.spec import problem_dirs

OPT_OUT = "KSCI_UNSANDBOXED_HARNESS"
# The GPU's device files (NVIDIA's, and ROCm's kfd and render nodes), bound one by one: never /dev whole, which
# holds the disks.
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")

CLONE_NEWNET = 0x40000000
# No kernel has a reason to write a file; this bounds one that does (the parent may set a lower hard limit).
FILE_SIZE_LIMIT = _BOUNDS["KSCI_MAX_HARNESS_OUTPUT_BYTES"]
OPEN_FILES_LIMIT = 1024  # the CUDA runtime holds a few dozen descriptors (device nodes, pipes, libraries)
# CPU seconds: twice the parent's timeout plus a minute. A synchronising host spins (CPU time ~ wall time) and the
# runtime's own threads add to it; the parent's wall-clock timeout is the real bound, this one backs it up.
CPU_SLACK_S = 60


def limit_resources(timeout_s: float) -> dict:
    """Lower the soft and hard limits of this process; returns what was set (or why not) per limit."""
    wanted = {
        "cpu_s": (resource.RLIMIT_CPU, 2 * int(timeout_s) + CPU_SLACK_S),
        "file_size_bytes": (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT),
        "open_files": (resource.RLIMIT_NOFILE, OPEN_FILES_LIMIT),
    }
    applied = {}
    for name, (kind, value) in wanted.items():
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(kind, (value, value))
            applied[name] = value
        except (ValueError, OSError) as exc:
            applied[name] = f"not applied: {exc}"
    # RLIMIT_NPROC counts every process and thread of the user, and is not enforced for root: the GPU runtime's
    # own threads would hit a low value, so process creation is left to the static screen and the process group.
    applied["processes"] = "not limited (RLIMIT_NPROC is per user; see docs/threat-model.md)"
    return applied


def drop_network() -> str:
    """Move this thread (and the threads it starts) into an empty network namespace, where the OS allows it.

    Called on the thread that will call the candidate, after the GPU runtime is initialised (its threads stay
    where they were). Without CAP_SYS_ADMIN the call fails with EPERM and the child goes on with the network.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) == 0:
        return "isolated (empty network namespace)"
    return f"not isolated: unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}"


def confine_self(report_fd: int) -> dict[str, str]:
    """Drop this thread's capabilities and filter the system calls of every thread (SIGSYS on a denied call, which
    writes a `denied` report on `report_fd` and ends the process: confine.report_denials). Called after
    drop_network, before the candidate is loaded. Returns what holds, per layer, for the `sandbox` report: the
    mounts as enter.py left them (KSCI_SANDBOX), the capabilities and the filter as set here."""
    entered = json.loads(os.environ.get(STATUS_VARIABLE) or "{}")
    done = {
        "mounts": entered.get("mounts", "not locked: not started in the sandbox"),
        "proc": entered.get("proc", "the host's"),
        "capabilities": confine.drop_capabilities(),
    }
    try:
        confine.report_denials(report_fd)
    except OSError as exc:
        return {**done, "syscalls": f"no syscall filter ({exc})"}
    return {**done, "syscalls": confine.install_filter(trap=True, all_threads=True)}


def confined_child(argv: list[str], scratch: Path, env: dict[str, str]) -> list[str]:
    """`argv` (the harness child, run in `scratch` with environment `env`) as it starts in its sandbox; unchanged
    where the user opted out. Raises EnvironmentProblem (one line) where no sandbox can be made."""
    if os.environ.get(OPT_OUT, "").strip().lower() in {"1", "true", "yes"}:
        return argv
    status = sandbox_status()
    if not status.ok:
        raise EnvironmentProblem(_refusal(status))
    devices = (*DEVICES, *(d for pattern in GPU_DEVICES for d in sorted(glob.glob(pattern))))
    read_only = [*toolchain_paths([]), "/sys", *python_paths(), str(PROJECT_ROOT / "ksci")]
    read_only += [str(d) for d in problem_dirs()]
    root = Root(read_only, [str(scratch)], cwd=str(scratch), env=env, devices=devices, proc=True)
    return wrap(argv, root, network=True, confine="self")


def python_paths() -> list[str]:
    """The folders the child's Python imports from: its prefixes, its interpreter's folder, site-packages and the
    search path, less any folder that holds the project's data/ or .env (the project root is replaced by its
    `ksci` package, bound on its own)."""
    private = [PROJECT_ROOT / "data", PROJECT_ROOT / ".env", Path.home()]
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    candidates += [*site.getsitepackages(), *sys.path]
    kept = []
    for path in filter(None, candidates):
        resolved = Path(path).resolve()
        if resolved.is_dir() and not any(_holds(resolved, p) for p in private):
            kept.append(str(resolved))
    return list(dict.fromkeys(kept))


def _holds(folder: Path, path: Path) -> bool:
    """`path` is `folder` or inside it."""
    return path == folder or folder in path.parents


def _refusal(status: SandboxStatus) -> str:
    return (
        f"cannot sandbox the harness child on this host ({status.reason}); candidates are not run unconfined: "
        f"set {OPT_OUT}=1 to run them without it (a kernel's host code can then read any file you can)"
    )
