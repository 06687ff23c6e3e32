"""The static screen: refuse a kernel source that does what a kernel has no business doing, before it is compiled.

A kernel gets its inputs, its outputs and a stream; it launches device work on that stream and returns. Creating
streams, events or graphs, reading clocks, looking up or redefining runtime functions, running code at load time,
and touching files, the network, the environment or other processes are the harness's business or nobody's.
The check is lexical: comments are dropped and string literals blanked (so neither can trip it, and a line
number still points at the source), then a table of patterns is matched, each with a reason a person (or the
LLM that wrote the kernel) can act on. String literals are matched as the compiler sees them, adjacent ones
joined (`"cudaStream" "Create"` is one name), and inline assembly and asm labels are searched for any name of
the runtime, the driver, Python or threads. It is a first line, not the only one: see docs/threat-model.md for what
the dynamic checks in the harness catch that a lexical check cannot.

A source over MAX_SOURCE_BYTES (1 MiB) is refused unread, and every rule runs in time linear in the source (no
pattern can backtrack over it: where one could, it is possessive or split into a head and a tail found once per
stretch, and the comments, literals and file-scope declarations are found by linear scans, literals.py and
load_time.py), so a hostile source costs at most a second or two here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ksci.evaluate.screen.literals import (
    blank_spans,
    joined_literals,
    strip_comments_and_literals,
    tokens,
    without_comments,
)
from ksci.evaluate.screen.load_time import top_level_initialisers

# Kernel sources here are 2-60 KB; a source this large is not a kernel, and refusing it bounds the screen's time.
MAX_SOURCE_BYTES = 1 << 20

_API = r"(?:cuda|hip)"
# Calls only, and not member calls (x.write(...), p->open(...)): a method of the kernel's own may have any name.
_CALL = r"(?<![\w.])(?<!->)(?:std::)?(?:{names})\s*\("

RULES: tuple[tuple[str, str], ...] = (
    # Streams, events and graphs are the harness's: the kernel runs on the stream it is given.
    (
        rf"\b{_API}Stream(?:Create\w*|BeginCapture\w*|EndCapture|AddCallback|AttachMemAsync)\b",
        "creates or captures a stream: use the stream you are given",
    ),
    (
        r"\bcuStream\w+|\bcuEvent\w+|\bcuGraph\w+|\bcuCtx\w+|\bcuLaunchHostFunc\b",
        "driver-API stream, event, graph or context call",
    ),
    (rf"\b{_API}Event\w*", "creates, records or reads an event: timing is the harness's job"),
    (rf"\b{_API}Graph\w*", "builds or launches a graph: launch on the given stream"),
    (rf"\b{_API}(?:StreamPerThread|StreamLegacy)\b", "launches on a stream other than the one given"),
    (rf"\b{_API}LaunchHostFunc\b", "enqueues host code on a stream"),
    # An L2 persisting-access window keeps the kernel's data in L2 through the harness's flush between timed calls.
    (
        r"\b\w*(?:[Aa]ccessPolicyWindow|PersistingL2\w*|AccessProperty\w*)\b",
        "sets an L2 persisting-access window: the cache is the harness's to flush between timed calls",
    ),
    (
        rf"\b{_API}(?:HostAlloc\w*|MallocHost|HostMalloc|HostRegister|HostGetDevicePointer|HostGetFlags)\b|\bcuMemHost\w+",
        "pins or maps host memory: a kernel's data lives on the device, and the host is the harness's",
    ),
    (
        rf"\b{_API}(?:DeviceReset|SetDevice|SetDeviceFlags|CtxResetPersistingL2Cache|Ipc\w+)\b",
        "changes the device or context, or shares memory with another process",
    ),
    # Timers: the harness times; a kernel reading clocks on the host is preparing to game it.
    (
        r"\b(?:clock_gettime|gettimeofday|timespec_get|QueryPerformanceCounter)\b|\b__rdtsc\w*|\brdtsc\w*",
        "reads a host clock",
    ),
    (r"\bstd::chrono\b|\bchrono::", "reads a host clock (std::chrono)"),
    # Looking up or replacing functions by name: the timer and the runtime must stay the harness's own (but see
    # _TMA_LOOKUP).
    (
        r"\b(?:dlsym|dlvsym|dlopen|dlmopen|dladdr\w*|dlinfo)\b|\bRTLD_\w+|\bLD_PRELOAD\b|\b__libc_\w+",
        "looks up or loads functions by name (dlsym/dlopen)",
    ),
    (
        rf"\b(?:{_API}GetDriverEntryPoint\w*|cuGetProcAddress\w*|{_API}GetFuncBySymbol|cuModuleLoad\w*|cuLibraryLoad\w*|{_API}LibraryLoad\w*)\b",
        "looks up driver functions or loads code by name",
    ),
    (r"##", "token pasting (##) can assemble a name this screen would refuse"),
    (
        r"^[ \t]*#[ \t]*define\s+(?:cuda|cu|hip|nccl|cublas|hipblas)[A-Z]\w*",
        "redefines a runtime API name with a macro",
    ),
    (
        r"\b(?:constructor|destructor)\b\s*+(?:\(\s*+\d*+\s*+\)\s*+)?\)\s*+\)|\[\[\s*+gnu::(?:constructor|destructor)",
        "runs code when the library is loaded or unloaded",
    ),
    (
        r"__attribute__\s*\(\(\s*(?:section|alias|ifunc|weakref)\b",
        "places code in a special section or aliases a symbol",
    ),
    # Files, network, environment, processes, raw system calls.
    (
        _CALL.format(
            names="fopen|freopen|fdopen|open|open64|openat|creat|opendir|unlink|rename|mkdir|rmdir|chdir|truncate|ftruncate"
        ),
        "opens or changes files",
    ),
    (
        _CALL.format(
            names="read|write|pread|pwrite|readv|writev|dprintf|dup|dup2|dup3|pipe|pipe2|close|mmap|mprotect|ioctl|sendfile"
        ),
        "reads or writes file descriptors or maps memory",
    ),
    (r"\b(?:std::)?[io]?fstream\b|\bstd::filesystem\b|\bFILE\s*\*", "uses files (fstream, FILE*, filesystem)"),
    (
        _CALL.format(
            names="socket|connect|bind|listen|accept|accept4|send|sendto|recv|recvfrom|getaddrinfo|gethostbyname"
        ),
        "uses the network",
    ),
    (
        _CALL.format(names="getenv|secure_getenv|setenv|putenv|unsetenv|clearenv") + r"|\benviron\b|\b__environ\b",
        "reads or changes the environment",
    ),
    (
        _CALL.format(
            names="system|popen|fork|vfork|clone|execl|execlp|execle|execv|execvp|execvpe|execve|fexecve|posix_spawn|posix_spawnp|kill|killpg|raise|signal|sigaction|ptrace|prctl|setrlimit|atexit|at_quick_exit|exit|_exit|_Exit|abort|pthread_create|syscall"
        ),
        "controls processes or signals, or makes raw system calls",
    ),
    (r"\bstd::(?:thread|jthread|async)\b", "starts host threads"),
    # Named at all, not only called: a function pointer to one (`auto f = &pthread_create;`) starts the same thread.
    (
        r"(?<![\w.])(?<!->)(?:pthread_\w+|thrd_\w+|__clone\w*|clone3|vfork|fork|posix_spawnp?|exec[lv]\w*|popen|ptrace)\b",
        "names a thread or process function (a call or a pointer to it): host threads and processes are not a kernel's",
    ),
    (
        r"&\s*(?:::\s*)?(?:system|kill|killpg|raise|signal|sigaction|prctl|setrlimit|atexit|at_quick_exit|exit|_exit|_Exit|abort|syscall)\b",
        "takes the address of a process-control function",
    ),
    (r"globaltimer", "reads the GPU's global timer (%globaltimer): timing is the harness's job"),
    (r"\b_?Py[A-Z][A-Za-z]*_\w+|\bPy_\w+", "uses Python's C API: the harness's process is not the kernel's"),
)
INCLUDES = (
    "dlfcn.h", "fstream", "thread", "chrono", "future", "filesystem", "unistd.h", "fcntl.h", "signal.h", "csignal",
    "spawn.h", "pthread.h", "netdb.h", "ctime", "time.h", "x86intrin.h", "immintrin.h", "link.h", "elf.h",
)  # fmt: skip
INCLUDE_PREFIXES = ("sys/", "netinet/", "arpa/", "linux/", "asm/")
# Inside string literals (inline assembly on the host, section names): raw system calls and load-time sections.
LITERAL_RULES: tuple[tuple[str, str], ...] = (
    (r"\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|\bsvc\s+#?0\b", "inline assembly makes a raw system call"),
    (r"\.(?:init_array|fini_array|preinit_array|ctors|dtors)\b", "places code in a load-time section"),
    (r'^"(?!cuTensorMapEncodeTiled")\s*(?:(?:cuda|cu|hip|nccl|dl|_?Py)[A-Z_]|pthread_)\w*\s*"$', "names a runtime function in a string (an asm label or a lookup by name)"),
    (r"\brdtscp?\b|\brdpmc\b|\brdpid\b", "inline assembly reads a host clock (rdtsc)"),
    (r"globaltimer", "inline assembly reads the GPU's global timer (%globaltimer): timing is the harness's job"),
)  # fmt: skip
# Inside inline assembly (its template, or an asm label): any name of the runtime, the driver, Python, threads.
ASM_RULE = (
    re.compile(r"\b(?:(?:cuda|cu|hip|nccl|dl|_?Py)[A-Z_]|pthread_)\w*"),
    "inline assembly or an asm label names a runtime, Python or thread function",
)
# Was `(?:\s+|\s*\b(?:volatile|...)\b)*\s*\(\s*$`, the same language, but exponential in the blanks before `(`.
_ASM_BEFORE = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s*+\b(?:volatile|__volatile__|goto|inline)\b)*+\s*+\(\s*+$")
# A definition named like a runtime function (`T cudaEventRecord(...) {`): `\b[A-Za-z_]\w*[\s*&]+(?:cuda|cu|hip|nccl|
# cublas|hipblas)[A-Z]\w*\s*\([^;{)]*\)\s*(?:noexcept\s*)?\{`, found as a head and then the first `;`, `{` or `)`
# after it, which must be the `)` of the tail; heads before the same stop share it, so nothing is scanned twice.
_INTERPOSITION = "defines a function named like a runtime API (interposition)"
_INTERPOSITION_HEAD = re.compile(r"\b[A-Za-z_]\w*+[\s*&]++(?:cuda|cu|hip|nccl|cublas|hipblas)[A-Z]\w*+\s*+\(")
_PARAMETERS_STOP = re.compile(r"[;{)]")
_INTERPOSITION_TAIL = re.compile(r"\)\s*+(?:noexcept\s*+)?\{")
_DECLARED_BEFORE = re.compile(r"([A-Za-z_]\w*|[*&>])\s*$")
_EMBED = re.compile(r"^[ \t]*#[ \t]*embed\b", re.M)

_CALL_PREFIX = _CALL.split("{")[0]
_COMPILED = tuple((re.compile(p, re.M), why) for p, why in RULES)
_COMPILED_LITERALS = tuple((re.compile(p), why) for p, why in LITERAL_RULES)
_HIP_HEADER = re.compile(r"^hip/[A-Za-z0-9_]+\.h$")
# Searched only up to the last `>` or `"`: past it no include can close, and each `#include <` would scan to the end.
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\s*[<\"]([^>\"]+)[>\"]", re.M)


@dataclass(frozen=True)
class ScreenResult:
    ok: bool
    reason: str = ""  # what was found and why it is refused; empty when ok
    line: int = 0  # 1-based line of the offending construct; 0 when the source as a whole is refused
    text: str = ""  # that line, stripped

    @property
    def message(self) -> str:
        if self.ok:
            return ""
        if not self.line:
            return f"rejected by the static screen: {self.reason}"
        return f"rejected by the static screen: line {self.line}: {self.reason}: `{self.text}`"


# The one driver lookup let through: cuTensorMapEncodeTiled, a host function that only fills a TMA descriptor,
# reached through the runtime as CUTLASS and DeepGEMM do (ksci/evaluate/screen/library.py allows the import too).
_TMA_LOOKUP = re.compile(r'\bcudaGetDriverEntryPoint(?:ByVersion)?(?=\s*\(\s*"cuTensorMapEncodeTiled")')


def screen_source(source: str) -> ScreenResult:
    """The first forbidden construct in the source, or ok; a source over MAX_SOURCE_BYTES is refused unread."""
    if (size := _size_over_limit(source)) is not None:
        return ScreenResult(
            ok=False,
            reason=f"the source is {size:,} bytes, over the screen's limit of {MAX_SOURCE_BYTES:,} bytes (1 MiB): "
            "a kernel is one self-contained source, far smaller than that",
        )
    spans = list(tokens(source))
    code, literals = strip_comments_and_literals(source, spans)
    code = blank_spans(code, [match.span() for match in _TMA_LOOKUP.finditer(source)])
    lines = source.splitlines()
    if (refused := _refused_include(without_comments(source, spans))) is not None:
        return _found(source, lines, *refused)
    if (embed := _EMBED.search(source)) is not None:
        return _found(source, lines, embed.start(), "embeds a file (#embed)")
    hits = _rule_hits(code) + _literal_hits(code, literals) + top_level_initialisers(code)
    if not hits:
        return ScreenResult(ok=True)
    position, why = min(hits)
    return _found(source, lines, position, why)


def source_too_large(source: str) -> bool:
    """Over MAX_SOURCE_BYTES: refused by the screen unread, and not handed to hipify before it (stages.prepare)."""
    return _size_over_limit(source) is not None


def _size_over_limit(source: str) -> int | None:
    """The source's size in UTF-8 bytes when over the limit (a longer string is over it without encoding)."""
    if len(source) > MAX_SOURCE_BYTES:
        return len(source.encode("utf-8", "surrogatepass"))
    size = len(source.encode("utf-8", "surrogatepass"))
    return size if size > MAX_SOURCE_BYTES else None


def _refused_include(text: str) -> tuple[int, str] | None:
    """(position, reason) of the first include that reaches outside the kernel or names a header it has no use for
    (`text`: the source without its comments)."""
    last_close = max(text.rfind(">"), text.rfind('"'))
    for match in _INCLUDE.finditer(text, 0, last_close + 1):
        header, quoted = match.group(1).strip(), '"' in match.group(0)
        # hipify writes its own include of the HIP runtime in quotes (`#include "hip/hip_runtime.h"`, in some
        # versions), so quoted HIP headers pass; any other quoted include could pull in a file of the host.
        if (quoted and not _HIP_HEADER.match(header)) or header.startswith("/") or ".." in header:
            return match.start(), f"includes the file {header!r}: a kernel is one self-contained source"
        if header in INCLUDES or header.startswith(INCLUDE_PREFIXES):
            return match.start(), f"includes <{header}>, which no kernel needs"
    return None


def _rule_hits(code: str) -> list[tuple[int, str]]:
    """(position, reason) of the first match of each rule in the code (calls: the first that is not a declaration)."""
    hits = []
    for pattern, why in _COMPILED:
        calls_only = pattern.pattern.startswith(_CALL_PREFIX)
        for match in pattern.finditer(code):
            if not (calls_only and _declares(code, match.start())):
                hits.append((match.start(), why))
                break
    if (position := _first_interposition(code)) is not None:
        hits.append((position, _INTERPOSITION))
    return hits


def _first_interposition(code: str) -> int | None:
    """Where the first definition named like a runtime function starts (see _INTERPOSITION_HEAD)."""
    position, stop, defines = 0, -1, False
    while (head := _INTERPOSITION_HEAD.search(code, position)) is not None:
        if head.end() > stop:
            found = _PARAMETERS_STOP.search(code, head.end())
            stop = found.start() if found else len(code)
            defines = found is not None and _INTERPOSITION_TAIL.match(code, stop) is not None
        if defines:
            return head.start()
        position = head.start() + 1
    return None


def _literal_hits(code: str, literals: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(position, reason) of each joined string literal that a literal rule refuses, or that names a runtime
    function inside inline assembly or an asm label."""
    hits = []
    for position, literal in joined_literals(code, literals):
        for pattern, why in _COMPILED_LITERALS:
            if pattern.search(literal):
                hits.append((position, why))
        before = code[max(0, position - 80) : position]
        if "asm" in before and _ASM_BEFORE.search(before) and ASM_RULE[0].search(literal):
            hits.append((position, ASM_RULE[1]))
    return hits


def _declares(code: str, position: int) -> bool:
    """The name at `position` is being declared or defined (`void write(`), not called: a kernel's own helper."""
    before = _DECLARED_BEFORE.search(code[max(0, position - 80) : position])
    return before is not None and before.group(1) not in ("return", "else", "do", "case", "throw", "co_return")


def _found(source: str, lines: list[str], position: int, why: str) -> ScreenResult:
    line = source.count("\n", 0, position) + 1
    text = lines[line - 1].strip() if line <= len(lines) else ""
    return ScreenResult(ok=False, reason=why, line=line, text=text[:200])
