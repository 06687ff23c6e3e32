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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    (
        r"\b[A-Za-z_]\w*[\s*&]+(?:cuda|cu|hip|nccl|cublas|hipblas)[A-Z]\w*\s*\([^;{)]*\)\s*(?:noexcept\s*)?\{",
        "defines a function named like a runtime API (interposition)",
    ),
    (r"##", "token pasting (##) can assemble a name this screen would refuse"),
    (
        r"^[ \t]*#[ \t]*define\s+(?:cuda|cu|hip|nccl|cublas|hipblas)[A-Z]\w*",
        "redefines a runtime API name with a macro",
    ),
    (
        r"\b(?:constructor|destructor)\b\s*(?:\(\s*\d*\s*\))?\s*\)\s*\)|\[\[\s*gnu::(?:constructor|destructor)",
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
_ASM_BEFORE = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s+|\s*\b(?:volatile|__volatile__|goto|inline)\b)*\s*\(\s*$")

_CALL_PREFIX = _CALL.split("{")[0]
_COMPILED = tuple((re.compile(p, re.M), why) for p, why in RULES)
_COMPILED_LITERALS = tuple((re.compile(p), why) for p, why in LITERAL_RULES)
_HIP_HEADER = re.compile(r"^hip/[A-Za-z0-9_]+\.h$")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\s*[<\"]([^>\"]+)[>\"]", re.M)
# A comment, or a string or character literal (with an optional encoding prefix); raw strings are rare in kernels.
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


@dataclass(frozen=True)
class ScreenResult:
    ok: bool
    reason: str = ""  # what was found and why it is refused; empty when ok
    line: int = 0  # 1-based line of the offending construct
    text: str = ""  # that line, stripped

    @property
    def message(self) -> str:
        return f"rejected by the static screen: line {self.line}: {self.reason}: `{self.text}`" if not self.ok else ""


# The one driver lookup let through: cuTensorMapEncodeTiled, a host function that only fills a TMA descriptor,
# reached through the runtime as CUTLASS and DeepGEMM do (ksci/evaluate/libcheck.py allows the import too).
_TMA_LOOKUP = re.compile(r'\bcudaGetDriverEntryPoint(?:ByVersion)?(?=\s*\(\s*"cuTensorMapEncodeTiled")')


def screen_source(source: str) -> ScreenResult:
    """The first forbidden construct in the source, or ok."""
    code, literals = _strip(source)
    for match in _TMA_LOOKUP.finditer(source):
        code = code[: match.start()] + " " * len(match.group(0)) + code[match.end() :]
    lines = source.splitlines()
    for match in _INCLUDE.finditer(_without_comments(source)):
        header, quoted = match.group(1).strip(), '"' in match.group(0)
        # hipify writes its own include of the HIP runtime in quotes (`#include "hip/hip_runtime.h"`, in some
        # versions), so quoted HIP headers pass; any other quoted include could pull in a file of the host.
        if (quoted and not _HIP_HEADER.match(header)) or header.startswith("/") or ".." in header:
            return _found(
                source, lines, match.start(), f"includes the file {header!r}: a kernel is one self-contained source"
            )
        if header in INCLUDES or header.startswith(INCLUDE_PREFIXES):
            return _found(source, lines, match.start(), f"includes <{header}>, which no kernel needs")
    if re.search(r"^[ \t]*#[ \t]*embed\b", source, re.M):
        return _found(
            source, lines, re.search(r"^[ \t]*#[ \t]*embed\b", source, re.M).start(), "embeds a file (#embed)"
        )
    hits = []
    for pattern, why in _COMPILED:
        calls_only = pattern.pattern.startswith(_CALL_PREFIX)
        for match in pattern.finditer(code):
            if not (calls_only and _declares(code, match.start())):
                hits.append((match.start(), why))
                break
    for position, literal in _joined(code, literals):
        for pattern, why in _COMPILED_LITERALS:
            if pattern.search(literal):
                hits.append((position, why))
        if _ASM_BEFORE.search(code[max(0, position - 80) : position]) and ASM_RULE[0].search(literal):
            hits.append((position, ASM_RULE[1]))
    for position, why in _top_level_initialisers(code):
        hits.append((position, why))
    if not hits:
        return ScreenResult(ok=True)
    position, why = min(hits)
    return _found(source, lines, position, why)


def _declares(code: str, position: int) -> bool:
    """The name at `position` is being declared or defined (`void write(`), not called: a kernel's own helper."""
    before = re.search(r"([A-Za-z_]\w*|[*&>])\s*$", code[max(0, position - 80) : position])
    return before is not None and before.group(1) not in ("return", "else", "do", "case", "throw", "co_return")


def _found(source: str, lines: list[str], position: int, why: str) -> ScreenResult:
    line = source.count("\n", 0, position) + 1
    text = lines[line - 1].strip() if line <= len(lines) else ""
    return ScreenResult(ok=False, reason=why, line=line, text=text[:200])


def _strip(source: str) -> tuple[str, list[tuple[int, str]]]:
    """Comments and literals blanked (newlines and length kept, so positions stay), and the literals found."""
    literals: list[tuple[int, str]] = []

    def blank(match: re.Match) -> str:
        text = match.group(0)
        if not text.startswith("/"):
            literals.append((match.start(), text))
            return re.sub(r"[^\n\"']", " ", text)  # the quotes stay: `extern "C"` is still recognisable
        return re.sub(r"[^\n]", " ", text)

    code = _TOKEN.sub(blank, source)
    return code, literals


def _joined(code: str, literals: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """String literals as the compiler sees them: adjacent ones (only blanks or comments between) concatenated,
    so that `"cudaStream" "Create"` is tested as `"cudaStreamCreate"`. Character literals stay alone."""
    joined: list[tuple[int, str, int]] = []  # (start, text as one literal, end)
    for position, literal in literals:
        body = re.sub(r'^(?:u8|[uUL])?"|"$', "", literal)
        end = position + len(literal)
        is_string = literal.endswith('"')
        if is_string and joined and joined[-1][1].endswith('"') and not code[joined[-1][2] : position].strip():
            start, text, _ = joined[-1]
            joined[-1] = (start, text[:-1] + body + '"', end)
        else:
            joined.append((position, f'"{body}"' if is_string else literal, end))
    return [(start, text) for start, text, _ in joined]


def _without_comments(source: str) -> str:
    return _TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)) if m.group(0).startswith("/") else m.group(0), source)


# Declarations at file scope (outside any function, struct or class body; namespaces and extern "C" blocks are
# transparent) whose initialiser runs code when the library is loaded: `static int x = setup();`, `Foo foo;` where
# Foo has a constructor, or a std:: object. Compile-time constants (constexpr, __device__/__constant__ data) are fine.
_DECLARATION = re.compile(
    r"(?:^|(?<=[;}\n]))[ \t]*(?P<decl>(?:(?:static|const|inline|thread_local|volatile)\s+)*"
    r"(?P<type>(?:std::)?[A-Za-z_][\w:]*(?:\s*<[^;{}]*>)?)\s*[*&]?\s*(?P<name>[A-Za-z_]\w*)\s*"
    r"(?P<init>=[^;{}]*|\([^;{}]*\)|\{[^;{}]*\})?)\s*;",
    re.S,
)
_HARMLESS_TYPES = re.compile(r"^(?:return|typedef|using|template|namespace|extern|constexpr|static_assert|__device__|__constant__|__shared__|__managed__|struct|class|enum|union|friend|public|private|protected|goto|case|default|else|do)\b")  # fmt: skip
_CALL_IN_INIT = re.compile(r"(?<![\w.])(?!sizeof\b|alignof\b|static_cast\b|reinterpret_cast\b|const_cast\b|decltype\b)[A-Za-z_]\w*\s*\(")  # fmt: skip
_CONSTRUCTOR = re.compile(r"\b(?:struct|class)\s+(?P<name>[A-Za-z_]\w*)[^;{]*\{")


def _top_level_initialisers(code: str) -> list[tuple[int, str]]:
    top = _file_scope(code)
    classes_with_constructors = set()
    for match in _CONSTRUCTOR.finditer(code):
        body = code[match.end() : _closing_brace(code, match.end() - 1)]
        if re.search(rf"(?<![~\w]){match.group('name')}\s*\([^;]*\)\s*(?::|\{{)", body):
            classes_with_constructors.add(match.group("name"))
    hits = []
    for match in _DECLARATION.finditer(top):
        decl, kind, init = match.group("decl").strip(), match.group("type"), match.group("init") or ""
        if _HARMLESS_TYPES.match(decl) or re.search(r"\b(?:constexpr|__device__|__constant__|__shared__)\b", decl):
            continue
        if kind.startswith("std::") and not kind.startswith(("std::int", "std::uint", "std::size_t", "std::array")):
            hits.append((match.start("decl"), f"a file-scope {kind} object runs its constructor at load time"))
        elif kind.split("<")[0].strip() in classes_with_constructors:
            hits.append((match.start("decl"), f"a file-scope {kind} object runs its constructor at load time"))
        elif init.startswith("=") and _CALL_IN_INIT.search(init) and "(" in init:
            hits.append((match.start("decl"), "a file-scope variable is initialised by a function call at load time"))
    return hits


def _file_scope(code: str) -> str:
    """The code with every character inside a non-transparent brace pair replaced by a space (newlines kept)."""
    out, depth, transparent = [], 0, []
    for i, ch in enumerate(code):
        if ch == "{":
            before = code[max(0, i - 200) : i]
            opens_scope = re.search(r'(?:\bnamespace(?:\s+[\w:]+)?|\bextern\s*"\s*")\s*$', before)
            transparent.append(bool(opens_scope))
            if not opens_scope:
                depth += 1
                out.append(" " if depth > 1 else ch)
                continue
            out.append(" ")
            continue
        if ch == "}":
            was_transparent = transparent.pop() if transparent else True
            if not was_transparent:
                depth -= 1
                out.append(ch if depth == 0 else " ")
                continue
            out.append(" ")
            continue
        out.append(ch if depth == 0 or ch == "\n" else " ")
    return "".join(out)


def _closing_brace(code: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return len(code)
