"""Comments and literals of a kernel source, found in one left-to-right pass (for ksci/evaluate/screen/source.py).

The screen blanks comments and string literals before matching its rules, and matches the literals on their own.
A single regular expression found them before, but it retried an unterminated comment or string at every later
opening (an unclosed `/*` followed by many `/*`, or a line of `"\\"\\"...`), which is quadratic. This scanner finds
the same tokens as that expression (`//...`, `/*...*/`, an optionally prefixed string, a character literal, tried
in that order at each position, leftmost first) and remembers where an unterminated one was already seen to end,
so no character is scanned more than a few times.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Where a token may begin: a comment, a string literal with an optional encoding prefix, a character literal.
_START = re.compile(r"/[/*]|(?:u8|[uUL])?\"|'")
# The body of a string or character literal: escapes (an escaped newline continues it) and any other character
# but the quote, a backslash or a newline. Each character decides its branch, so the possessive loop loses nothing.
_BODY = {'"': re.compile(r'(?:\\.|[^"\\\n])*+', re.S), "'": re.compile(r"(?:\\.|[^'\\\n])*+", re.S)}
_NOT_NEWLINE = re.compile(r"[^\n]")
_NOT_NEWLINE_OR_QUOTE = re.compile(r"[^\n\"']")
_LITERAL_EDGES = re.compile(r'^(?:u8|[uUL])?"|"$')


def tokens(source: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each comment and literal, as `//[^\\n]*|/\\*.*?\\*/|(?:u8|[uUL])?"..."|'...'` finds them.

    An unterminated literal is not a token (the scan moves one character on, as the expression did); a quote of
    the same kind before the point where it stopped cannot start a terminated one either (it was the second
    character of an escape, so its scan would stop at the same place), and is skipped without scanning."""
    position, dead_until, no_block_end = 0, {'"': -1, "'": -1}, False
    while (start := _START.search(source, position)) is not None:
        at, lead = start.start(), start.group()
        if lead == "//":
            end = source.find("\n", at)
            end = len(source) if end < 0 else end
            yield at, end
            position = end
            continue
        if lead == "/*":
            close = -1 if no_block_end else source.find("*/", at + 2)
            if close >= 0:
                yield at, close + 2
                position = close + 2
                continue
            no_block_end, position = True, at + 1
            continue
        quote_at = start.end() - 1
        quote = source[quote_at]
        if quote_at >= dead_until[quote]:
            stop = _BODY[quote].match(source, quote_at + 1).end()
            if stop < len(source) and source[stop] == quote:
                yield at, stop + 1
                position = stop + 1
                continue
            dead_until[quote] = stop
        position = at + 1


def strip_comments_and_literals(
    source: str, spans: list[tuple[int, int]] | None = None
) -> tuple[str, list[tuple[int, str]]]:
    """Comments and literals blanked (newlines and length kept, so positions stay), and the literals found.

    A literal keeps its quotes (`extern "C"` is still recognisable); a comment keeps only its newlines. `spans` are
    the source's tokens when the caller has them already."""
    pieces: list[str] = []
    literals: list[tuple[int, str]] = []
    position = 0
    for start, end in tokens(source) if spans is None else spans:
        text = source[start:end]
        pieces.append(source[position:start])
        if text.startswith("/"):
            pieces.append(_NOT_NEWLINE.sub(" ", text))
        else:
            literals.append((start, text))
            pieces.append(_NOT_NEWLINE_OR_QUOTE.sub(" ", text))
        position = end
    pieces.append(source[position:])
    return "".join(pieces), literals


def without_comments(source: str, spans: list[tuple[int, int]] | None = None) -> str:
    """The source with comments blanked (newlines kept) and literals left as they are."""
    pieces: list[str] = []
    position = 0
    for start, end in tokens(source) if spans is None else spans:
        if source.startswith("/", start):
            pieces += [source[position:start], _NOT_NEWLINE.sub(" ", source[start:end])]
            position = end
    pieces.append(source[position:])
    return "".join(pieces)


def blank_spans(code: str, spans: list[tuple[int, int]]) -> str:
    """`code` with each (start, end) span, in order and not overlapping, replaced by as many spaces."""
    pieces: list[str] = []
    position = 0
    for start, end in spans:
        pieces += [code[position:start], " " * (end - start)]
        position = end
    pieces.append(code[position:])
    return "".join(pieces)


def joined_literals(code: str, literals: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """String literals as the compiler sees them: adjacent ones (only blanks or comments between) concatenated,
    so that `"cudaStream" "Create"` is tested as `"cudaStreamCreate"`. Character literals stay alone."""
    joined: list[tuple[int, list[str], int, bool]] = []  # (start, bodies or the literal, end, is a string)
    for position, literal in literals:
        end = position + len(literal)
        is_string = literal.endswith('"')
        body = _LITERAL_EDGES.sub("", literal) if is_string else literal
        if is_string and joined and joined[-1][3] and not code[joined[-1][2] : position].strip():
            joined[-1][1].append(body)
            joined[-1] = (joined[-1][0], joined[-1][1], end, True)
        else:
            joined.append((position, [body], end, is_string))
    return [(start, f'"{"".join(parts)}"' if is_string else parts[0]) for start, parts, _, is_string in joined]
