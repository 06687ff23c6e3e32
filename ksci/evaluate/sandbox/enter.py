"""The step that runs inside the sandbox's namespaces (ksci/evaluate/sandbox/compiler.py starts it under util-linux's
`unshare`): build a new root from bind mounts, pivot into it, and exec the command with a filtered environment.

Run as a script (`python -I -S enter.py SPEC -- COMMAND...`), so it imports the standard library only and
nothing of the project: it is the last code that sees the host's filesystem. SPEC is a JSON object:

    root      an empty directory of the host to mount the new root on (a tmpfs, private to this namespace)
    ro, rw    paths bound at the same place inside, read-only or writable (a top-level symbolic link such as
              /bin -> usr/bin is recreated as a link)
    devices   device files bound one by one into an otherwise empty /dev (/dev/null, /dev/urandom, ...)
    proc      whether to mount a fresh /proc (of the sandbox's own PID namespace)
    cwd, env  the working directory and the whole environment of the command
    tmp_bytes the size of the fresh, empty /tmp (a tmpfs)
    confine   "exec" (the default): drop every capability and install the syscall filter (EPERM) before the exec;
              "self": leave both to the command (the harness child, which needs CAP_SYS_ADMIN to drop its network
              once the GPU runtime is up: ksci/evaluate/sandbox/harness.py)
    layers    which of "mounts", "capabilities", "syscalls" to apply (default: all; tests turn all but one off to
              show that each alone stops a remount)

Every path not named is absent: /etc/passwd, /root, the home directory, the project's .env and data/. A failure is
one line on stderr starting with "ksci sandbox:" and exit status 125, and nothing is run.

After the root is entered, three layers, each of which alone stops `mount -o remount,rw` of a read-only folder:
the mounts are locked (the process moves into a nested user and mount namespace, where the kernel locks every
mount it inherits: MNT_LOCK_READONLY and the like, so a remount fails with EPERM even with CAP_SYS_ADMIN there),
every capability is dropped with the securebits locked (confine.py), and a seccomp filter denies mounts,
namespaces, ptrace, non-AF_UNIX sockets and the like (confine.py). no-new-privileges is set too. A fresh /proc
has its sysctls, sysrq-trigger and the like bound read-only (PROC_READ_ONLY: root's uid can write a sysctl without
any capability). What each layer did is passed to the command as KSCI_SANDBOX (a JSON object: mounts, proc,
capabilities, syscalls); a layer the host refuses (a nested user namespace where user namespaces are off, a host
without libseccomp) is named there, and the others still hold.
"""

from __future__ import annotations

import ctypes
import importlib.util
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
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
LAYERS = ("mounts", "capabilities", "syscalls")
STATUS_VARIABLE = "KSCI_SANDBOX"
# Of a fresh /proc, what root could write to the host's kernel through (sysctls, sysrq): bound read-only.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")

_libc = ctypes.CDLL(None, use_errno=True)


def _load_confine():
    """ksci/evaluate/sandbox/confine.py, by its path (no import of the project: this runs as `python -I -S`)."""
    spec = importlib.util.spec_from_file_location("ksci_confine", os.path.join(os.path.dirname(__file__), "confine.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


confine = _load_confine()


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
        spec["proc_status"] = _protect_proc(f"{root}/proc")


def _protect_proc(proc: str) -> str:
    """Bind PROC_READ_ONLY read-only over themselves. Where a kernel refuses it (gVisor's /proc, say), the sandbox
    is still made and the status says so: each sysctl's own checks, the dropped capabilities and a uid that is not
    the host's root (in a user namespace, as an ordinary user) then stand between the command and those files."""
    for name in PROC_READ_ONLY:
        if os.path.exists(f"{proc}/{name}"):
            try:
                _bind(f"{proc}/{name}", f"{proc}/{name}", read_only=True)
            except SandboxSetupError as exc:
                return f"writable as mounted: {exc}"
    return "read-only"


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


def lock_mounts(proc: int | None) -> str:
    """Move into a nested user and mount namespace, uid and gid 0 there mapped to this process's: the kernel locks
    every mount copied into a mount namespace of a less privileged user namespace (read-only stays read-only, no
    mount can be taken off the ones under it), whatever capabilities the process holds in the new one.

    `proc`: a descriptor of a /proc opened before the root changed (the new root may have none), through which the
    new namespace's id maps are written. Returns what was done, in one line; not locked where the kernel refuses a
    nested user namespace (user namespaces turned off, as root)."""
    uid, gid = os.getuid(), os.getgid()
    if proc is None:
        return "not locked: no /proc to write a nested user namespace's id maps through"
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return f"not locked: no nested user namespace ({os.strerror(ctypes.get_errno())})"
    try:
        for name, line in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            _write_at(proc, f"self/{name}", line, missing_ok=name == "setgroups")
    except OSError as exc:  # still locked; ids unmapped: the command runs as the overflow uid, without capabilities
        return f"locked (nested user namespace; its id maps could not be written: {exc.strerror})"
    return "locked (nested user namespace)"


def _write_at(folder: int, path: str, text: str, missing_ok: bool = False) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC, dir_fd=folder)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def confine_process(spec: dict, proc: int | None, last_cap: int) -> dict[str, str]:
    """The layers after the root is entered (see the module's docstring); what each did."""
    layers = spec.get("layers", LAYERS)
    done = dict.fromkeys(LAYERS, "turned off")
    if "mounts" in layers:
        done["mounts"] = lock_mounts(proc)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if spec.get("proc"):
        done["proc"] = spec.get("proc_status", "")
    if spec.get("confine", "exec") != "exec":
        return {**done, "capabilities": "left to the command", "syscalls": "left to the command"}
    if "capabilities" in layers:
        done["capabilities"] = confine.drop_capabilities(last_cap)
    if "syscalls" in layers:
        done["syscalls"] = confine.install_filter()
    return done


def _open_proc() -> int | None:
    try:
        return os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


def _last_cap(proc: int | None) -> int:
    """The highest capability this kernel knows, or 63 where /proc cannot say (confine.drop_capabilities)."""
    if proc is None:
        return 63
    try:
        fd = os.open("sys/kernel/cap_last_cap", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
        try:
            return int(os.read(fd, 16))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return 63


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("ksci sandbox: usage: enter.py SPEC -- COMMAND...", file=sys.stderr)
        return FAILED
    spec, command = json.loads(argv[0]), argv[2:]
    proc = _open_proc()
    try:
        last_cap = _last_cap(proc)
        build_root(spec)
        enter_root(spec["root"])
        os.chdir(spec.get("cwd") or "/tmp")
        layers = confine_process(spec, proc, last_cap)
    except (SandboxSetupError, OSError) as exc:
        print(f"ksci sandbox: {exc}", file=sys.stderr)
        return FAILED
    finally:
        if proc is not None:
            os.close(proc)  # a path back into the host's filesystem: never left to the command
    env = {**spec.get("env", {}), STATUS_VARIABLE: json.dumps(layers)}
    sys.stdout.flush()
    try:
        os.execve(command[0], command, env)
    except OSError as exc:
        print(f"ksci sandbox: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return FAILED if exc.errno != 2 else 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
