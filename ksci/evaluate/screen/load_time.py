"""File-scope code that runs when the library is loaded, for the static screen (ksci/evaluate/screen/source.py).

Declarations at file scope (outside any function, struct or class body; namespaces and extern "C" blocks are
transparent) whose initialiser runs code when the library is loaded: `static int x = setup();`, `Foo foo;` where
Foo has a constructor, or a std:: object. Compile-time constants (constexpr, __device__/__constant__ data) are fine.

Every scan here is linear in the source. The declarations were found with one regular expression,

    (?:^|(?<=[;}\\n]))[ \\t]*(?P<decl>(?:(?:static|const|inline|thread_local|volatile)\\s+)*
    (?P<type>(?:std::)?[A-Za-z_][\\w:]*(?:\\s*<[^;{}]*>)?)\\s*[*&]?\\s*(?P<name>[A-Za-z_]\\w*)\\s*
    (?P<init>=[^;{}]*|\\([^;{}]*\\)|\\{[^;{}]*\\})?)\\s*;

which backtracks: tried after every newline, each try ran to the next `;` (80 KB of `int x = 1` lines took 24 s).
`Declarations` finds the same matches with the same groups: a match holds no `;` but its last, so each `;`-ended
segment has at most one (from the first start that matches); what follows a type is decided once per position;
the qualifier chains, the template ends and the initialisers are worked out once per segment and remembered.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

_BRACE = re.compile(r"[{}]")
_NOT_NEWLINE = re.compile(r"[^\n]")
_OPENS_SCOPE = re.compile(r'(?:\bnamespace(?:\s+[\w:]+)?|\bextern\s*"\s*")\s*$')

_HARMLESS_TYPES = re.compile(r"^(?:return|typedef|using|template|namespace|extern|constexpr|static_assert|__device__|__constant__|__shared__|__managed__|struct|class|enum|union|friend|public|private|protected|goto|case|default|else|do)\b")  # fmt: skip
_COMPILE_TIME = re.compile(r"\b(?:constexpr|__device__|__constant__|__shared__)\b")
_CALL_IN_INIT = re.compile(r"(?<![\w.])(?!sizeof\b|alignof\b|static_cast\b|reinterpret_cast\b|const_cast\b|decltype\b)[A-Za-z_]\w*\s*\(")  # fmt: skip

# A struct or class with a body, and a call-like use of a name (a constructor is one, followed by `: ` or `{`).
_CLASS_HEAD = re.compile(r"\b(?:struct|class)\s++(?P<name>[A-Za-z_]\w*+)")
_BODY_OR_END = re.compile(r"[;{]")
_NAME_CALLED = re.compile(r"(?<![~\w])(?P<name>[A-Za-z_]\w*+)\s*+\(")
_PARAMETERS_END = re.compile(r"\)\s*+[:{]")

# The pieces of a declaration. Possessive where what follows cannot start with what was taken, so nothing is lost.
_DECLARATION_START = re.compile(r"(?:^|(?<=[;}\n]))[ \t]*+[A-Za-z_]")
_QUALIFIER = re.compile(r"(?:static|const|inline|thread_local|volatile)\s++")
_TYPE_REST = re.compile(r"[\w:]*+")
_SPACE = re.compile(r"\s*+")
_POINTER_AND_NAME = re.compile(r"\s*+[*&]?\s*+[A-Za-z_]\w*+\s*+")
_IDENTIFIER_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def top_level_initialisers(code: str) -> list[tuple[int, str]]:
    """(position, reason) of each file-scope declaration that runs code at load time."""
    classes_with_constructors = _classes_with_constructors(code)
    hits = []
    for decl_at, decl, kind, init in declarations(file_scope(code)):
        decl = decl.strip()
        if _HARMLESS_TYPES.match(decl) or _COMPILE_TIME.search(decl):
            continue
        if kind.startswith("std::") and not kind.startswith(("std::int", "std::uint", "std::size_t", "std::array")):
            hits.append((decl_at, f"a file-scope {kind} object runs its constructor at load time"))
        elif kind.split("<")[0].strip() in classes_with_constructors:
            hits.append((decl_at, f"a file-scope {kind} object runs its constructor at load time"))
        elif init.startswith("=") and _CALL_IN_INIT.search(init) and "(" in init:
            hits.append((decl_at, "a file-scope variable is initialised by a function call at load time"))
    return hits


def file_scope(code: str) -> str:
    """The code with every character inside a non-transparent brace pair replaced by a space (newlines kept)."""
    pieces, depth, transparent, position = [], 0, [], 0
    for brace in _BRACE.finditer(code):
        at = brace.start()
        between = code[position:at]
        pieces.append(between if depth == 0 else _NOT_NEWLINE.sub(" ", between))
        position = at + 1
        if brace.group() == "{":
            before = code[max(0, at - 200) : at]
            opens_scope = ("namespace" in before or "extern" in before) and _OPENS_SCOPE.search(before) is not None
            transparent.append(opens_scope)
            if not opens_scope:
                depth += 1
            pieces.append("{" if depth == 1 and not opens_scope else " ")
        elif not (transparent.pop() if transparent else True):
            depth -= 1
            pieces.append("}" if depth == 0 else " ")
        else:
            pieces.append(" ")
    tail = code[position:]
    pieces.append(tail if depth == 0 else _NOT_NEWLINE.sub(" ", tail))
    return "".join(pieces)


def closing_braces(code: str) -> dict[int, int]:
    """The position of the `}` that closes each `{` (an unclosed one is absent: it runs to the end)."""
    closes, opened = {}, []
    for brace in _BRACE.finditer(code):
        if brace.group() == "{":
            opened.append(brace.start())
        elif opened:
            closes[opened.pop()] = brace.start()
    return closes


def _class_bodies(code: str) -> list[tuple[str, int]]:
    """(name, position of the `{`) of each `struct|class NAME ... {`, as `\\b(?:struct|class)\\s+(?P<name>[A-Za-z_]
    \\w*)[^;{]*\\{` finds them: a head matches when the first `;` or `{` after it is a `{` (found once per stretch)."""
    bodies, position, stop = [], 0, -1
    while (head := _CLASS_HEAD.search(code, position)) is not None:
        if head.end() > stop:
            found = _BODY_OR_END.search(code, head.end())
            stop = found.start() if found else len(code)
        if stop < len(code) and code[stop] == "{":
            bodies.append((head.group("name"), stop))
            position = stop + 1
        else:
            position = head.start() + 1
    return bodies


def _classes_with_constructors(code: str) -> set[str]:
    """Names of classes whose body holds `NAME(...) :` or `NAME(...) {` (`(?<![~\\w])NAME\\s*\\([^;]*\\)\\s*(?::|\\{)`).

    Each use `NAME(` gets the end of the earliest `) :` or `) {` after it, unless a `;` comes first; a class has a
    constructor when some use inside its body ends inside it too: a suffix minimum over the uses, so nested bodies
    are not searched again."""
    bodies = _class_bodies(code)
    names = {name for name, _ in bodies}
    if not names:
        return set()
    semicolons = [found.start() for found in re.finditer(";", code)]
    ends = [(found.start(), found.end() - 1) for found in _PARAMETERS_END.finditer(code)]
    end_starts = [start for start, _ in ends]
    uses: dict[str, tuple[list[int], list[float]]] = {name: ([], []) for name in names}
    for called in _NAME_CALLED.finditer(code):
        if called.group("name") not in names:
            continue
        opened = called.end()
        first = bisect_left(end_starts, opened)
        semicolon = bisect_left(semicolons, opened)
        before = semicolons[semicolon] if semicolon < len(semicolons) else len(code)
        ends_at = ends[first][1] if first < len(ends) and ends[first][0] < before else float("inf")
        uses[called.group("name")][0].append(called.start())
        uses[called.group("name")][1].append(ends_at)
    for _, earliest in uses.values():
        for k in range(len(earliest) - 2, -1, -1):
            earliest[k] = min(earliest[k], earliest[k + 1])
    closes = closing_braces(code)
    found = set()
    for name, opened in bodies:
        starts, earliest = uses[name]
        first = bisect_left(starts, opened + 1)
        if first < len(starts) and earliest[first] < closes.get(opened, len(code)):
            found.add(name)
    return found


@dataclass(frozen=True)
class _Parsed:
    type_start: int
    type_end: int
    init_at: int  # where the initialiser starts (the segment's `;` when there is none)
    decl_end: int


class _Segment:
    """What a declaration ending at the `;` at `end` can be, worked out once (see the module docstring)."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.end = text, end
        self.braces = [found.start() for found in _BRACE.finditer(text, start, end)]
        self.last_brace = self.braces[-1] if self.braces else start - 1
        paren = text.rfind(")", start, end)
        after_paren_is_space = paren >= 0 and _SPACE.match(text, paren + 1, end).end() == end
        self.paren_close = paren if paren > self.last_brace and after_paren_is_space else -1
        self.brace_init = -1  # `{...}` as the initialiser: the last two braces, then only space
        if len(self.braces) >= 2 and text[self.braces[-2]] == "{" and text[self.last_brace] == "}":
            if _SPACE.match(text, self.last_brace + 1, end).end() == end:
                self.brace_init = self.braces[-2]
        self.parsed: dict[int, _Parsed | None] = {}
        self.names: dict[int, tuple[int, int] | None] = {}
        self.template_ends: dict[int, int] = {}

    def init_end(self, at: int) -> int:
        """Where the declaration ends if its initialiser starts at `at` (-1: none can start there)."""
        if at == self.end:
            return self.end
        if self.text[at] == "=" and at > self.last_brace:
            return self.end
        if self.text[at] == "(" and at > self.last_brace and self.paren_close > at:
            return self.paren_close + 1
        return self.last_brace + 1 if at == self.brace_init else -1

    def name_from(self, at: int) -> tuple[int, int] | None:
        """`\\s*[*&]?\\s*NAME\\s*` from `at`, then an initialiser or the `;`: (initialiser start, end), or None."""
        if at not in self.names:
            found = _POINTER_AND_NAME.match(self.text, at, self.end)
            ends = self.init_end(found.end()) if found else -1
            self.names[at] = (found.end(), ends) if found and ends >= 0 else None
        return self.names[at]

    def template_end(self, opened: int) -> int:
        """The `>` that closes a template opened at `opened`: the last one before the next brace or `;` that a
        name and an initialiser can follow (-1: none)."""
        stop_index = bisect_left(self.braces, opened)
        stop = self.braces[stop_index] if stop_index < len(self.braces) else self.end
        if stop not in self.template_ends:
            floor = self.braces[stop_index - 1] if stop_index > 0 else -1
            closing = self.text.rfind(">", floor + 1, stop)
            while closing >= 0 and self.name_from(closing + 1) is None:
                closing = self.text.rfind(">", floor + 1, closing)
            self.template_ends[stop] = closing
        closing = self.template_ends[stop]
        return closing if closing > opened else -1

    def type_at(self, start: int) -> _Parsed | None:
        """A type starting at `start`, then the rest, in the order the expression tries them: the longest type
        with template arguments, without, then the type cut short with the name taken from its end."""
        text = self.text
        if text[start] not in _IDENTIFIER_START:
            return None
        word_end = _TYPE_REST.match(text, start + 1, self.end).end()
        after = _SPACE.match(text, word_end, self.end).end()
        if after < self.end and text[after] == "<" and (closing := self.template_end(after)) >= 0:
            return _Parsed(start, closing + 1, *self.name_from(closing + 1))
        if (rest := self.name_from(word_end)) is not None:
            return _Parsed(start, word_end, *rest)
        if (ends := self.init_end(after)) < 0:
            return None
        floor = max(start + 1, text.rfind(":", start, word_end) + 1)
        for cut in range(word_end - 1, floor - 1, -1):
            if text[cut] in _IDENTIFIER_START:
                return _Parsed(start, cut, after, ends)
        return None

    def declaration_at(self, start: int) -> _Parsed | None:
        """The declaration starting at `start`: qualifiers taken greedily, then given back one by one."""
        chain, at, following = [], start, None
        while at not in self.parsed:
            chain.append(at)
            qualifier = _QUALIFIER.match(self.text, at, self.end)
            if qualifier is None:
                break
            at = qualifier.end()
        else:
            following = self.parsed[at]
        for at in reversed(chain):
            following = following if following is not None else self.type_at(at)
            self.parsed[at] = following
        return self.parsed[start]


def declarations(top: str) -> list[tuple[int, str, str, str]]:
    """(start, declaration, type, initialiser) of each match of the expression in the module docstring."""
    found, start = [], 0
    while (end := top.find(";", start)) >= 0:
        segment = None
        for candidate in _DECLARATION_START.finditer(top, start, end):
            segment = segment or _Segment(top, start, end)
            decl_at = candidate.end() - 1
            if (parsed := segment.declaration_at(decl_at)) is not None:
                init = top[parsed.init_at : parsed.decl_end] if parsed.init_at < end else ""
                kind = top[parsed.type_start : parsed.type_end]
                found.append((decl_at, top[decl_at : parsed.decl_end], kind, init))
                break
        start = end + 1
    return found
