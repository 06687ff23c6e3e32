"""Tolerant readers of LLM answers: JSON in prose or fences, code blocks, and SEARCH/REPLACE edits.

Each reader returns (value, None) or (None, a one-line reason) that can be logged, recorded and fed back.
"""

from __future__ import annotations

import json
import re

import jsonschema

_FENCE = re.compile(r"```([A-Za-z0-9_+.-]*)[ \t]*\n(.*?)```", re.S)
_EDIT = re.compile(r"<{5,9} SEARCH[^\n]*\n(.*?)\n?={5,9}[ \t]*\n(.*?)\n?>{5,9} REPLACE", re.S)
CODE_LANGUAGES = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "hip"}


def extract_json(text: str) -> tuple[object | None, str | None]:
    """The JSON object of an answer: the whole text, a ```json fence, or the first object in the prose."""
    stripped = text.strip()
    if not stripped:
        return None, "empty answer"
    try:
        return json.loads(stripped), None
    except json.JSONDecodeError:
        pass
    for language, body in _FENCE.findall(text):
        if language.lower() in ("json", ""):
            try:
                return json.loads(body), None
            except json.JSONDecodeError:
                continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text):
        try:
            value, _end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value, None
    return None, "no JSON object in the answer"


def validate(value: object, schema: dict) -> str | None:
    """None when `value` follows `schema`, else the most relevant error in one line."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the answer"
    return f"{where}: {error.message[:300]}"


def parse_structured(text: str, schema: dict) -> tuple[dict | None, str | None]:
    value, problem = extract_json(text)
    if problem:
        return None, problem
    problem = validate(value, schema)
    return (None, f"JSON does not follow the schema: {problem}") if problem else (value, None)


def extract_code(text: str) -> tuple[str | None, str | None]:
    """The kernel source of an answer: the longest fenced C/C++/CUDA/HIP block."""
    blocks = [body for language, body in _FENCE.findall(text) if language.lower() in CODE_LANGUAGES]
    blocks = [b for b in blocks if b.strip() and not _EDIT.search(b)]
    if blocks:
        return max(blocks, key=len), None
    if re.search(r"```[A-Za-z0-9_+.-]*[ \t]*\n", text):
        return None, "a code block is opened but never closed (truncated answer?)"
    return None, "no code block in the answer"


def parse_edits(text: str) -> list[tuple[str, str]]:
    """SEARCH/REPLACE blocks, in order:

    <<<<<<< SEARCH
    exact lines of the Base source
    =======
    their replacement
    >>>>>>> REPLACE
    """
    return [(search, replace) for search, replace in _EDIT.findall(text)]


def apply_edits(source: str, edits: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """Apply each edit to the source in turn. Every SEARCH block must match whole lines exactly once: as written,
    else with any indentation and trailing spaces (models often re-indent what they quote)."""
    for number, (search, replacement) in enumerate(edits, 1):
        if not search.strip():
            return None, f"edit {number}: empty SEARCH block"
        found = []
        for pattern in (_exact_pattern(search), _loose_pattern(search)):
            found = list(pattern.finditer(source))
            if found:
                break
        if len(found) > 1:
            return (
                None,
                f"edit {number}: SEARCH block matches {len(found)} places; include more lines to make it unique",
            )
        if not found:
            first = search.strip().splitlines()[0][:80]
            return None, f"edit {number}: SEARCH block not found in the Base source (first line: {first!r})"
        source = source[: found[0].start()] + replacement.strip("\n") + source[found[0].end() :]
    return source, None


def _exact_pattern(search: str) -> re.Pattern:
    return re.compile(r"^" + re.escape(search.strip("\n")) + r"$", re.M)


def _loose_pattern(search: str) -> re.Pattern:
    """The SEARCH lines with any indentation and trailing spaces (models often re-indent what they quote)."""
    lines = [re.escape(line.strip()) for line in search.strip("\n").splitlines()]
    return re.compile(r"^[ \t]*" + r"[ \t]*\n[ \t]*".join(lines) + r"[ \t]*$", re.M)
