"""Limits the harness child puts on itself before it loads a candidate: resource limits and no network.

Applied in the child rather than in a preexec_fn, because the parent may be a threaded Prefect worker (where
preexec_fn is unsafe) and because the child knows when the GPU runtime is up: every limit here was chosen to
leave CUDA and ROCm working (see docs/threat-model.md). Nothing here fails the run when the OS refuses it;
what was applied is reported in the fingerprint.
"""

from __future__ import annotations

import ctypes
import os
import resource

CLONE_NEWNET = 0x40000000
FILE_SIZE_LIMIT = 64 * 2**20  # no kernel has a reason to write a file; this bounds one that does
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
