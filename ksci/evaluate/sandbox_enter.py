"""The step that runs inside the sandbox's namespaces (ksci/evaluate/sandbox.py starts it under util-linux's
`unshare`): build a new root from bind mounts, pivot into it, and exec the command with a filtered environment.

Run as a script (`python -I -S sandbox_enter.py SPEC -- COMMAND...`), so it imports the standard library only and
nothing of the project: it is the last code that sees the host's filesystem. SPEC is a JSON object:

    root      an empty directory of the host to mount the new root on (a tmpfs, private to this namespace)
    ro, rw    paths bound at the same place inside, read-only or writable (a top-level symbolic link such as
              /bin -> usr/bin is recreated as a link)
    devices   device files bound one by one into an otherwise empty /dev (/dev/null, /dev/urandom, ...)
    proc      whether to mount a fresh /proc (of the sandbox's own PID namespace)
    cwd, env  the working directory and the whole environment of the command
    tmp_bytes the size of the fresh, empty /tmp (a tmpfs)

Every path not named is absent: /etc/passwd, /root, the home directory, the project's .env and data/. A failure is
one line on stderr starting with "ksci sandbox:" and exit status 125, and nothing is run.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS = 38
# statvfs's flags and the mount flags they stand for: a read-only remount inside a user namespace must keep the
# flags the mount already has (the kernel locks them), or it fails with EPERM.
_KEPT_FLAGS = {2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME, 2048: MS_NODIRATIME, 4096: MS_RELATIME}
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203}
FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxSetupError(Exception):
    """One step of the set-up failed; the message names it."""


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if _libc.mount(*encoded[:3], ctypes.c_ulong(flags), encoded[3]) != 0:
        error = os.strerror(ctypes.get_errno())
        raise SandboxSetupError(f"mount {source or fstype} on {target} failed: {error}")


def _bind(source: str, target: str, read_only: bool) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        kept = os.statvfs(source).f_flag
        flags = sum(flag for bit, flag in _KEPT_FLAGS.items() if kept & bit)
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _covered(path: str, read_only: list[str]) -> bool:
    """A path inside a folder already bound read-only is visible through it (and could not be bound onto)."""
    return any(path != parent and path.startswith(parent.rstrip("/") + "/") for parent in read_only)


def build_root(spec: dict) -> None:
    """Mount the new root on spec["root"] and populate it; the host's root is still the process's root."""
    root = spec["root"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    os.makedirs(f"{root}/tmp")
    _mount("tmpfs", f"{root}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={int(spec['tmp_bytes'])}")
    read_only = [os.path.normpath(p) for p in spec.get("ro", []) if os.path.lexists(p)]
    writable = [os.path.normpath(p) for p in spec.get("rw", [])]
    for path in sorted({*read_only, *writable}, key=lambda p: (p.count("/"), p)):
        if path in read_only and _covered(path, read_only):
            continue
        target = root + path
        if os.path.islink(path) and os.path.dirname(path) == "/":
            os.symlink(os.readlink(path), target)
            continue
        _bind(path, target, read_only=path not in writable)
    os.makedirs(f"{root}/dev", exist_ok=True)
    for device in spec.get("devices", []):
        if os.path.exists(device):
            _bind(device, root + device, read_only=False)
    if spec.get("proc"):
        os.makedirs(f"{root}/proc", exist_ok=True)
        _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def enter_root(root: str) -> None:
    """Make `root` the process's root and detach the old one, so that no path leads back to the host's files."""
    os.chdir(root)
    number = _PIVOT_ROOT.get(platform.machine())
    if number is not None and _libc.syscall(number, b".", b".") == 0:
        if _libc.umount2(b".", MNT_DETACH) != 0:
            raise SandboxSetupError(f"detaching the old root failed: {os.strerror(ctypes.get_errno())}")
    else:
        os.chroot(".")  # no pivot_root here: the old root stays mounted but out of reach of every path
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("ksci sandbox: usage: sandbox_enter.py SPEC -- COMMAND...", file=sys.stderr)
        return FAILED
    spec, command = json.loads(argv[0]), argv[2:]
    try:
        build_root(spec)
        enter_root(spec["root"])
        os.chdir(spec.get("cwd") or "/tmp")
    except (SandboxSetupError, OSError) as exc:
        print(f"ksci sandbox: {exc}", file=sys.stderr)
        return FAILED
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    sys.stdout.flush()
    try:
        os.execve(command[0], command, spec.get("env", {}))
    except OSError as exc:
        print(f"ksci sandbox: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return FAILED if exc.errno != 2 else 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
