"""The compiler's sandbox: every compile runs where it can read only the toolchain, the candidate's own work folder
and the paths the toolchain names, with no network.

A kernel source decides which files its compiler opens: an `#include` spelled any of a dozen ways, a macro that
expands to a path, `__has_include`, the assembler's `.include` and `.incbin`. The compile log goes back to the
LLM that wrote the kernel, and the library to the harness, so whatever the compiler can read, a source can
exfiltrate. No screen of spellings closes that (issue 26 lists the ones that got through); taking the files
away does. Each compile runs under util-linux's `unshare` (present on every Linux host, the GPU hosts included,
where no package can be installed) in new user, mount, PID, IPC, UTS and network namespaces, and
enter.py builds a root of bind mounts there: /usr and the other system folders read-only (the
compilers, their headers and libraries), /etc/alternatives and the dynamic linker's cache but no other file of
/etc, the toolchain's own folders (/opt/rocm*, CUDA_HOME, the ROCm bitcode copy), the work folder writable, an
empty /tmp, /dev/null and the random devices. /etc/passwd, /root, the home folder, the project's .env and data/
do not exist in there, and the command's environment is an allowlist (no keys, no proxies).

Where no sandbox can be made (no `unshare`, user namespaces disabled and not root), compiling is refused with one
line, unless the user sets KSCI_UNSANDBOXED_COMPILE=1 to compile unconfined (README, "The compiler's sandbox").
What the sandbox does not cover is in docs/threat-model.md.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ksci.evaluate.options import EnvironmentProblem

OPT_OUT = "KSCI_UNSANDBOXED_COMPILE"
ENTER = Path(__file__).with_name("enter.py")
# The system's software: compilers, their headers, libraries and helpers (/bin and /lib are links into /usr on
# merged-/usr systems, and recreated as links).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# The only files of /etc a compiler reads: Debian's alternatives (c++, ld, ...) and the dynamic linker's cache.
ETC_PATHS = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
TOOLCHAIN_GLOBS = ("/opt/rocm*", "/opt/cuda*", "/usr/local/cuda*")
TOOLCHAIN_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
TMP_BYTES = 2 << 30  # the compilers' temporaries (nvcc's intermediate files are megabytes)
# Namespaces: with a user namespace where the kernel allows one (any user), else as root without it.
USER_MODE = ("--user", "--map-root-user")
NAMESPACES = ("--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child")
PROBE_TIMEOUT_S = 30
# The least-privilege layers enter.py applies after entering the root, each of which alone keeps a
# read-only folder read-only; what each did reaches the command as this variable (a JSON object).
LAYERS = ("mounts", "capabilities", "syscalls")
STATUS_VARIABLE = "KSCI_SANDBOX"

ENV_NAMES = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "SOURCE_DATE_EPOCH"}
ENV_PREFIXES = ("CUDA_", "NVCC_", "HIP_", "HIPCC_", "ROCM_", "HSA_", "AMD_", "CUDAFE_")
_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


@dataclass(frozen=True)
class SandboxStatus:
    """Whether a sandbox can be made on this host, with which `unshare` options, or why not."""

    ok: bool
    options: tuple[str, ...] = ()
    reason: str = ""
    unshare: str = "unshare"  # its absolute path, found once
    layers: tuple[tuple[str, str], ...] = ()  # (layer, what the probe's enter.py did), LAYERS' order

    @property
    def mode(self) -> str:
        return "user namespace" if "--user" in self.options else "root, no user namespace"


def opted_out() -> bool:
    """The user asked to compile without the sandbox (KSCI_UNSANDBOXED_COMPILE=1)."""
    return os.environ.get(OPT_OUT, "").strip().lower() in {"1", "true", "yes"}


def refusal(status: SandboxStatus) -> str:
    """The one line that says compiling is refused here, and how to opt out."""
    return (
        f"cannot sandbox the compiler on this host ({status.reason}); kernels are not compiled unconfined: "
        f"set {OPT_OUT}=1 to compile without the sandbox (a kernel source can then read any file you can)"
    )


def require_sandbox() -> None:
    """Raise EnvironmentProblem (one line) where a compile would have no sandbox and the user did not opt out."""
    if opted_out():
        return
    status = sandbox_status()
    if not status.ok:
        raise EnvironmentProblem(refusal(status))


def sandboxed(
    command: list[str],
    work: Path,
    toolchain,
    tools: tuple[str, ...] = (),
    search_path: str | None = None,
    proc: bool = False,
) -> list[str]:
    """`command` (a compiler's argv, run with cwd `work`) as it runs in the sandbox; unchanged where opted out.

    `toolchain`: the ksci.evaluate.toolchain.toolchains.Toolchain that made the command (its compiler's and bitcode folders
    are bound read-only); `tools`: other programs the command runs (their folders are bound read-only too), such as
    cuobjdump on the built library; `search_path`: PATH in the sandbox, if not the host's; `proc`: a /proc of the
    sandbox's own (cuobjdump crashes without one)."""
    if opted_out():
        return command
    require_sandbox()
    extra = [toolchain.compiler, os.path.realpath(toolchain.compiler), toolchain.device_libs, *tools]
    env = compiler_environment(toolchain.target)
    if search_path is not None:
        env["PATH"] = search_path
    return wrap(command, Root(toolchain_paths(extra), [str(work)], cwd=str(work), env=env, proc=proc))


@dataclass(frozen=True)
class Root:
    """What a sandbox's new root holds: these paths at the same places, read-only or writable, the device files
    bound one by one, and (`proc`) a fresh /proc of its own PID namespace; the command's working folder and its
    whole environment."""

    read_only: list[str]
    writable: list[str]
    cwd: str
    env: dict[str, str]
    devices: tuple[str, ...] = DEVICES
    proc: bool = False


def wrap(
    command: list[str], root: Root, network: bool = False, confine: str = "exec", layers: tuple[str, ...] = LAYERS
) -> list[str]:
    """The argv that runs `command` in new namespaces, in `root`, its mounts locked, without capabilities and under
    the syscall filter (enter.py).

    `network`: keep the host's network namespace (the harness child drops it itself once the GPU runtime is up);
    `confine`: "self" leaves the capabilities and the filter to the command (the harness child:
    ksci.evaluate.sandbox.harness.confine_self); `layers`: the least-privilege layers to apply (all; tests apply one
    at a time)."""
    spec = {
        "root": str(_root_mountpoint()),
        "ro": root.read_only,
        "rw": root.writable,
        "devices": list(root.devices),
        "proc": root.proc,
        "cwd": root.cwd,
        "env": root.env,
        "tmp_bytes": TMP_BYTES,
        "confine": confine,
        "layers": list(layers),
    }
    status = sandbox_status()
    options = [o for o in status.options if not (network and o == "--net")]
    return [status.unshare, *options, *_enter(), json.dumps(spec), "--", *command]


def toolchain_paths(extra: list[str | None]) -> list[str]:
    """The read-only paths of a compile: the system's software, the toolchain's folders, and `extra` (a file's
    folder is bound whole: a compiler finds its siblings there)."""
    paths = [*SYSTEM_PATHS, *ETC_PATHS]
    paths += [p for pattern in TOOLCHAIN_GLOBS for p in sorted(glob.glob(pattern))]
    paths += [os.environ[name] for name in TOOLCHAIN_VARIABLES if os.environ.get(name)]
    for path in filter(None, extra):
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        paths += [folder, os.path.realpath(folder)]
    return [p for p in dict.fromkeys(paths) if os.path.isabs(p) and os.path.lexists(p)]


def compiler_environment(target: str) -> dict[str, str]:
    """The compiler's whole environment, from an allowlist: the search path, the locale and the toolchains' own
    settings, never a key, a token or a proxy; HOME and TMPDIR are the sandbox's empty /tmp."""
    env = {name: value for name, value in os.environ.items() if _allowed(name)}
    env.update(HOME="/tmp", TMPDIR="/tmp")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    if target == "rocm":
        env["HIP_PLATFORM"] = "amd"  # as Toolchain.environment sets it: hipcc would take the NVIDIA path
    return env


def _allowed(name: str) -> bool:
    if any(hint in name.upper() for hint in _SECRET_HINTS):
        return False
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Try to make a sandbox (once per process): with a user namespace, then, as root, without one. The probe
    runs a shell in it that must not see /etc/passwd nor this user's home."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return SandboxStatus(False, reason="util-linux's unshare is not on PATH")
    modes = [(*USER_MODE, *NAMESPACES)] + ([NAMESPACES] if os.geteuid() == 0 else [])
    reasons = []
    for options in modes:
        reason, layers = _probe(unshare, tuple(options))
        if reason is None:
            return SandboxStatus(True, tuple(options), unshare=unshare, layers=tuple(layers.items()))
        reasons.append(reason)
    return SandboxStatus(False, reason="; ".join(dict.fromkeys(reasons)))


def _probe(unshare: str, options: tuple[str, ...]) -> tuple[str | None, dict[str, str]]:
    """(None, what each layer did) if a sandbox made with these `unshare` options works, else the first line of
    why not."""
    home = os.path.expanduser("~")
    script = (
        f'test ! -e /etc/passwd && test ! -e "{home}" && test -w /tmp && echo sandboxed && echo "${STATUS_VARIABLE}"'
    )
    spec = {
        "root": str(_root_mountpoint()),
        "ro": toolchain_paths([]),
        "rw": [],
        "devices": list(DEVICES),
        "cwd": "/tmp",
        "env": {"PATH": "/usr/bin:/bin"},
        "tmp_bytes": 1 << 20,
    }
    argv = [unshare, *options, *_enter(), json.dumps(spec), "--", "/bin/sh", "-c"]
    try:
        proc = subprocess.run([*argv, script], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{unshare} {' '.join(options)}: {exc}", {}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines[:1] == ["sandboxed"]:
        return None, json.loads(lines[1]) if len(lines) == 2 else {}
    said = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}, host files still visible"])[-1]
    return said, {}


def _enter() -> list[str]:
    """The argv of the set-up step. The system's Python where there is one: it needs the standard library only,
    and an interpreter of the user's (a pyenv under a 0700 home, say) may not be executable once in a user
    namespace."""
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    return [python, "-I", "-S", str(ENTER)]


def _root_mountpoint() -> Path:
    """An empty folder of this user's that each sandbox mounts its own root on, in its own mount namespace (so
    concurrent compiles share it safely); refused if something else took its name."""
    path = Path(tempfile.gettempdir()) / f"ksci-sandbox-root-{os.getuid()}"
    path.mkdir(mode=0o755, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise EnvironmentProblem(f"{path} is not a folder of this user's: the compiler's sandbox cannot mount there")
    return path
