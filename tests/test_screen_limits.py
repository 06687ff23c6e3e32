"""The static screen on hostile input (issue 26, "Slow input"): a source over the size limit is refused at once,
naming the limit, and every rule is linear, so the shapes that made the old expressions backtrack (80 KB of
`int x = 1` lines took 24 s; blanks after `asm` never ended) are screened in a few seconds at the limit. What is bounded
is the CPU time of the screening thread, loosely (60 s; the old expressions needed hours at the limit), not the
wall clock, which a busy machine stretches (21 s on two cores kept busy by another job); the linear scans are also
checked against the expressions they replace, on random sources small enough for those expressions."""

from __future__ import annotations

import random
import re
import time

import pytest

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.screen.literals import strip_comments_and_literals, tokens
from ksci.evaluate.screen.load_time import _classes_with_constructors, closing_braces, declarations, file_scope
from ksci.evaluate.screen.source import _ASM_BEFORE, MAX_SOURCE_BYTES, _first_interposition, screen_source
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.spec import load_problem

LOOSE_CPU_SECONDS = 60.0

# Each repeated up to the limit, with whether the screen lets it through (it decides as it did on small ones).
SHAPES = {
    "declarations without `;`": ("int x = 1\n", True),
    "declarations": ("int x = 1;\n", True),
    "open parentheses": ("(", True),
    "identifiers": ("a ", True),
    "one identifier": ("a", True),
    "qualifiers": ("static\n", True),
    "unclosed template arguments": ("A<\n", True),
    "calls in an initialiser": ("x = f(\n", True),
    "class heads without a body": ("struct A ", True),
    "nested class bodies": ("struct A {", True),
    "open braces": ("{", True),
    "includes never closed": ("#include <a\n", True),
    "unterminated comments": ("/* ", True),
    "a string of escaped quotes": ('\\"', True),
    "character literals": ("'a' ", True),
    "adjacent string literals": ('"a" ', True),
    "blanks between asm and a string": ("asm" + " " * 77 + '"x"\n', True),
    "blanks after `constructor`": ("constructor" + " " * 60 + "x\n", True),
    "runtime-named heads without a body": ("a cudaA(", True),
    "TMA lookups": ('cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", 0);\n', True),
    "quoted includes never closed": ('#include "a\n', False),
}


def _filled(unit: str, size: int) -> str:
    source = unit * (size // len(unit))
    return '"' + source[:-1] if unit == '\\"' else source  # one line: `"\"\"\"...`


def _timed(source: str):
    """The screen's result and the CPU seconds this thread spent on it (other processes do not count)."""
    started = time.thread_time()
    result = screen_source(source)
    return result, time.thread_time() - started


@pytest.mark.slow
@pytest.mark.parametrize(("unit", "passes"), list(SHAPES.values()), ids=list(SHAPES))
def test_pathological_shapes_at_the_limit_are_screened_quickly(unit, passes):
    source = _filled(unit, MAX_SOURCE_BYTES)
    assert len(source.encode()) <= MAX_SOURCE_BYTES
    result, seconds = _timed(source)
    assert "limit" not in result.reason and result.ok == passes, result.message
    assert seconds < LOOSE_CPU_SECONDS, f"{seconds:.1f} CPU s"


def test_two_megabytes_of_declarations_are_refused_by_the_size_limit_at_once():
    result, seconds = _timed("int x = 1;\n" * (2 * 1024 * 1024 // 11))
    assert not result.ok and "1 MiB" in result.reason and "1,048,576 bytes" in result.reason
    assert result.message.startswith("rejected by the static screen: the source is 2,097,")
    assert seconds < LOOSE_CPU_SECONDS, f"{seconds:.1f} CPU s"


HONEST = 'extern "C" int f(float* c, int n, void* stream) {\n    return 0;\n}\n'


def test_the_limit_is_on_bytes_and_a_source_at_it_is_screened():
    padding = MAX_SOURCE_BYTES - len(HONEST.encode()) - len("//\n")
    at_limit = HONEST + "//" + "x" * padding + "\n"
    assert len(at_limit.encode()) == MAX_SOURCE_BYTES and screen_source(at_limit).ok
    one_over = at_limit + " "
    refused = screen_source(one_over)
    assert not refused.ok and refused.line == 0 and "1,048,577 bytes" in refused.reason
    # Fewer characters than the limit, more bytes: two bytes each in UTF-8.
    wide = HONEST + "// " + "é" * (MAX_SOURCE_BYTES // 2) + "\n"
    assert len(wide) < MAX_SOURCE_BYTES and not screen_source(wide).ok


def test_an_oversized_source_is_rejected_and_never_compiled(tmp_path):
    problem = load_problem("fp8_gemm")
    correct = sorted(problem.solutions("correct"))[0].read_text()
    assert screen_source(correct).ok
    source = correct + "// " + "x" * MAX_SOURCE_BYTES + "\n"
    options = EvaluationOptions(target="cuda", cache_dir=tmp_path / "cache")
    verdict = evaluate_source(problem, source, options)
    assert verdict.status == Status.REJECTED and "limit of 1,048,576 bytes (1 MiB)" in verdict.message
    assert not (tmp_path / "cache").exists()


def test_an_oversized_cuda_source_bound_for_rocm_is_refused_before_hipify(tmp_path, monkeypatch):
    """The size limit comes before hipify: a 2 MB CUDA source for ROCm is rejected by the screen, with its limit
    message, and hipify-perl never reads it."""
    from ksci.evaluate import host_stages

    def hipify_called(source):
        raise AssertionError("hipify ran on a source over the size limit")

    monkeypatch.setattr(host_stages, "hipify_source", hipify_called)
    problem = load_problem("fp8_gemm")
    cuda = next(path for path in sorted(problem.solutions("correct")) if path.suffix == ".cu").read_text()
    source = cuda + "// " + "x" * (2 * MAX_SOURCE_BYTES) + "\n"
    options = EvaluationOptions(target="rocm", arch="gfx942", cache_dir=tmp_path / "cache")
    verdict = evaluate_source(problem, source, options)
    assert verdict.status == Status.REJECTED and "limit of 1,048,576 bytes (1 MiB)" in verdict.message
    assert not (tmp_path / "cache").exists()


# The expressions the linear scans replace, to check that they find the same things.
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DECLARATION = re.compile(
    r"(?:^|(?<=[;}\n]))[ \t]*(?P<decl>(?:(?:static|const|inline|thread_local|volatile)\s+)*"
    r"(?P<type>(?:std::)?[A-Za-z_][\w:]*(?:\s*<[^;{}]*>)?)\s*[*&]?\s*(?P<name>[A-Za-z_]\w*)\s*"
    r"(?P<init>=[^;{}]*|\([^;{}]*\)|\{[^;{}]*\})?)\s*;",
    re.S,
)
_CONSTRUCTOR = re.compile(r"\b(?:struct|class)\s+(?P<name>[A-Za-z_]\w*)[^;{]*\{")
_INTERPOSITION = r"\b[A-Za-z_]\w*[\s*&]+(?:cuda|cu|hip|nccl|cublas|hipblas)[A-Z]\w*\s*\([^;{)]*\)\s*(?:noexcept\s*)?\{"
_ASM = r"\b(?:asm|__asm__|__asm)\b(?:\s+|\s*\b(?:volatile|__volatile__|goto|inline)\b)*\s*\(\s*$"
FRAGMENTS = (
    " ", "\t", "\n", "\n", ";", ";", "{", "}", "(", ")", "<", ">", "=", "*", "&", ":", "::", ",", "~", "a", "b", "x1",
    "A", "Foo", "_y", "42", "static ", "const ", "inline ", "volatile ", "constexpr ", "int ", "std::", "std::string ",
    "struct ", "class ", "namespace ", 'extern "C" ', "__device__ ", "return ", "f(", "setup()", '"', "'", "\\", '"s"',
    "'c'", "//", "/*", "*/", 'u8"', "asm", "asm volatile(", "__asm__ ", " volatile ", "cudaX", "cudaEventRecord(",
    "noexcept ", "Foo() {}", "Foo(int x) : v(x) {}", "S s;", "A<b> c = d(e);", "x = f();", "y(g());", "z{1};",
    "struct Foo {", "class A {", "struct A ", "A(", "~A()", ") :", ") {", "int cudaMalloc(", "void* cuX(int) ",
)  # fmt: skip


def _closing_brace(code: str, opened: int) -> int:
    depth = 0
    for at in range(opened, len(code)):
        depth += {"{": 1, "}": -1}.get(code[at], 0)
        if depth == 0:
            return at
    return len(code)


def test_linear_scans_find_what_the_expressions_found():
    rng = random.Random(26)
    for _ in range(1500):
        source = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 50)))
        assert list(tokens(source)) == [match.span() for match in _TOKEN.finditer(source)], source
        code, _ = strip_comments_and_literals(source)
        top = file_scope(code)
        expected = [(m.start("decl"), m.group("decl"), m.group("type"), m.group("init") or "") for m in _DECLARATION.finditer(top)]  # fmt: skip
        assert declarations(top) == expected, source
        closes = closing_braces(code)
        assert all(_closing_brace(code, at) == closes.get(at, len(code)) for at, ch in enumerate(code) if ch == "{")
        with_constructors = set()
        for match in _CONSTRUCTOR.finditer(code):
            body = code[match.end() : _closing_brace(code, match.end() - 1)]
            if re.search(rf"(?<![~\w]){match.group('name')}\s*\([^;]*\)\s*(?::|\{{)", body):
                with_constructors.add(match.group("name"))
        assert _classes_with_constructors(code) == with_constructors, source
        first = re.search(_INTERPOSITION, code)
        assert _first_interposition(code) == (first.start() if first else None), source


def test_the_asm_context_is_the_language_it_was():
    """The old expression is exponential in blanks, so the windows here are short."""
    rng = random.Random(26)
    pieces = ("asm", "__asm__", "__asm", " ", "  ", "\n", "volatile", "__volatile__", "goto", "inline", "(", "x", ";")
    for _ in range(3000):
        window = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        assert bool(_ASM_BEFORE.search(window)) == bool(re.search(_ASM, window)), window
