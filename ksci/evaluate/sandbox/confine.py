"""Least privilege for code that runs in the sandbox: every capability dropped, and a seccomp filter that denies
the system calls no compiler and no kernel's host code has a use for.

Standard library only (ctypes): enter.py loads this file by its path (it runs as `python -I -S` and
imports nothing of the project), and the harness child imports it as a module. Two users:

- a compile: enter.py drops the capabilities and installs the filter (denied calls fail with EPERM) right
  before it execs the compiler, so every process of the compile inherits both;
- the harness child: it keeps its capabilities until its network is dropped (unshare(CLONE_NEWNET) needs
  CAP_SYS_ADMIN, after the GPU runtime is up), then drops them and installs the filter on every thread (TSYNC)
  before it loads the candidate. There a denied call raises SIGSYS, and `report_denials`' handler writes one
  `denied` line naming the call on the report pipe and ends the process with DENIED_EXIT, which the parent turns
  into the candidate's verdict (ksci.evaluate.judge.classify).

The filter is libseccomp's (the system's libseccomp.so.2, a dependency of apt on Debian and Ubuntu), which
resolves names to this architecture's numbers and fails calls of any other architecture. Where it cannot be
loaded, `install_filter` says so and installs nothing: what is then lost is in docs/threat-model.md.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal

# System calls no compiler and no kernel's host code needs: mounts (the old and the new API), other roots, other
# namespaces, other processes' memory, kernel modules and BPF, keyrings, io_uring (its operations bypass seccomp),
# the clock, swap, reboot, and the like (close to Docker's default profile for a process without capabilities).
DENIED = (
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_getfd", "bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "create_module", "keyctl", "add_key", "request_key", "open_by_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "quotactl", "quotactl_fd", "swapon", "swapoff",
    "reboot", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "iopl", "ioperm", "syslog", "vhangup", "lookup_dcookie", "uselib", "nfsservctl", "_sysctl",
)  # fmt: skip
# clone with any of these flags makes a namespace (CLONE_NEWTIME shares its bit with the exit signal in clone(2)).
CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
AF_UNIX = 1
DENIED_EXIT = 6  # exit status of a harness child that made a denied system call (after its `denied` report)

_ALLOW, _TRAP, _ERRNO = 0x7FFF0000, 0x00030000, 0x00050000
_ATTR_BADARCH, _ATTR_TSYNC = 2, 4
_CMP_NE, _CMP_MASKED_EQ = 1, 7
_SIGINFO_SYSCALL, _SIGINFO_ARCH = 24, 28  # offsets of si_syscall and si_arch in a 64-bit siginfo_t
_SA_SIGINFO = 4
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "ppc64le": 0xC0000015}

_libc = ctypes.CDLL(None, use_errno=True)
DENIAL_NAMES: dict[int, str] = {}  # system call number -> name, of the calls the filter covers (for report_denials)

PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (off), NO_CAP_AMBIENT_RAISE, each with its lock: an exec as uid 0 gives back
# no capability, and no later call can change that.
SECUREBITS = 0b11101111
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities(last_cap: int | None = None) -> str:
    """Empty this thread's bounding, ambient, inheritable, permitted and effective capability sets and lock the
    securebits, so that no exec (as uid 0 or of a file with capabilities) gives any back. Returns what was done, in
    one line. Capabilities are per thread: the threads that exist already keep theirs."""
    last = last_cap if last_cap is not None else _last_cap()
    if _libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) != 0:
        secure = f"securebits not set ({os.strerror(ctypes.get_errno())})"
    else:
        secure = "securebits locked"
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            return f"not dropped: PR_CAPBSET_DROP failed: {os.strerror(ctypes.get_errno())}"
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        return f"not dropped: capset failed: {os.strerror(ctypes.get_errno())}"
    return f"dropped (all {last + 1}, {secure})"


def _last_cap() -> int:
    """The highest capability this kernel knows (/proc/sys/kernel/cap_last_cap), or 63 where it cannot be read
    (dropping one it does not know fails with EINVAL, which is passed over)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


def _libseccomp() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None


def install_filter(trap: bool = False, all_threads: bool = False) -> str:
    """Deny DENIED, clone with a CLONE_NEW* flag and socket() of any family but AF_UNIX, on this thread and its
    children (`all_threads`: on every thread of the process, TSYNC). A denied call fails with EPERM, or with
    `trap` raises SIGSYS (and a new SIGSYS handler is refused, so report_denials' stays); clone3 always fails with
    ENOSYS (its flags cannot be filtered; glibc then uses clone). Returns what was done, in one line."""
    lib = _libseccomp()
    if lib is None:
        return "no syscall filter (libseccomp.so.2 not found)"
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_rule_add_array.argtypes += [ctypes.POINTER(_ArgCmp)]
    deny = _TRAP if trap else _ERRNO | errno.EPERM
    ctx = lib.seccomp_init(ctypes.c_uint32(_ALLOW))
    if not ctx:
        return "no syscall filter (seccomp_init failed)"
    try:
        denied = _add_rules(lib, ctx, deny, trap)
        lib.seccomp_attr_set(ctypes.c_void_p(ctx), _ATTR_BADARCH, ctypes.c_uint32(deny))
        if all_threads and lib.seccomp_attr_set(ctypes.c_void_p(ctx), _ATTR_TSYNC, 1) != 0:
            return "no syscall filter (this libseccomp cannot synchronise threads)"
        loaded = lib.seccomp_load(ctypes.c_void_p(ctx))
    except OSError as exc:
        return f"no syscall filter ({exc.strerror})"
    finally:
        lib.seccomp_release(ctypes.c_void_p(ctx))
    if loaded != 0:
        return f"no syscall filter (seccomp_load failed: {os.strerror(-loaded)})"
    return f"filtered ({denied} system calls denied or restricted, with {'SIGSYS' if trap else 'EPERM'})"


def _add_rules(lib: ctypes.CDLL, ctx: int, deny: int, trap: bool) -> int:
    """Add the rules to the filter `ctx`; returns how many calls they cover. Fills DENIAL_NAMES."""
    rules: list[tuple[int, str, list[_ArgCmp]]] = [(deny, name, []) for name in DENIED]
    rules.append((deny, "socket", [_ArgCmp(0, _CMP_NE, AF_UNIX, 0)]))
    rules += [(deny, "clone", [_ArgCmp(0, _CMP_MASKED_EQ, flag, flag)]) for flag in CLONE_NEW_FLAGS]
    rules.append((_ERRNO | errno.ENOSYS, "clone3", []))
    if trap:
        rules.append((_ERRNO | errno.EPERM, "rt_sigaction", [_ArgCmp(0, _CMP_MASKED_EQ, 0xFFFFFFFF, signal.SIGSYS)]))
    for action, name, args in rules:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:  # no such call on this architecture
            continue
        DENIAL_NAMES[number] = name
        array = (_ArgCmp * max(1, len(args)))(*args)
        code = lib.seccomp_rule_add_array(ctypes.c_void_p(ctx), action, number, len(args), array)
        if code != 0:
            raise OSError(-code, f"seccomp rule for {name}: {os.strerror(-code)}")
    return len({name for _, name, _ in rules})


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_installed: list = []  # the handler and its state, kept alive for the process's life


class _SigAction(ctypes.Structure):
    """glibc's struct sigaction on 64-bit Linux (x86_64, aarch64)."""

    _fields_ = [
        ("handler", _HANDLER),
        ("mask", ctypes.c_ulong * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


def report_denials(fd: int) -> None:
    """On SIGSYS (a call the filter denied, on any thread), write {"event": "denied", "syscall": NAME} on `fd` and
    end the process with DENIED_EXIT at once: nothing of the candidate runs after a denied call. Installed before
    the filter, which then refuses any other SIGSYS handler."""

    def on_sigsys(_signo: int, info: int, _context: int) -> None:
        number = ctypes.c_int.from_address(info + _SIGINFO_SYSCALL).value
        name = DENIAL_NAMES.get(number, f"number {number}")
        if ctypes.c_uint.from_address(info + _SIGINFO_ARCH).value != native:
            name = f"number {number} of another architecture"
        try:
            os.write(fd, (json.dumps({"event": "denied", "syscall": name}) + "\n").encode())
        finally:
            os._exit(DENIED_EXIT)

    native = _AUDIT_ARCH.get(os.uname().machine, 0)
    handler = _HANDLER(on_sigsys)
    action = _SigAction(handler=handler, flags=_SA_SIGINFO)
    _installed.extend([handler, action])
    if _libc.sigaction(signal.SIGSYS, ctypes.byref(action), None) != 0:
        raise OSError(ctypes.get_errno(), "sigaction(SIGSYS) failed")
