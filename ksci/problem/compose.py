"""Compose template points into one kernel that dispatches on the shape: a parameter point per benchmark shape.

A plan names a default point and a point per shape key (ksci.problem.spec.shape_key):

    {"default": {"template": "mma", "params": {...}},
     "shapes": {"1024x1536x7168": {"template": "mma", "params": {...}}, ...}}

Points may come from different templates of the problem's dialect. Each distinct point is rendered once and
becomes variant N: its leading `#include` / `#pragma once` lines are hoisted (deduplicated) to the top, and its body
is wrapped in `namespace ksci_vN { ... }` between `#define <entry> <entry>_vN` and `#undef <entry>`, so that its
`extern "C"` entry point keeps C linkage under a name of its own; the macros the body defines are undefined after
it, so that variants with the same macro names (the HIP templates' BM, BN, ...) do not clash. Then comes the real
entry point, with the signature of problem.yaml, which calls the variant of the shape its integer arguments
describe, and the default variant for any other shape (the test shapes are not the benchmark shapes).

The composability rule for a template (docs/problem-format.md): every `#include` comes before any code; the
definitions may sit in an anonymous namespace; there is one `extern "C"` entry point. A template that breaks it
is refused, as a value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ksci.problem.render import render_kernel
from ksci.problem.spec import Problem, ProblemError, shape_key

_PRELUDE = re.compile(r"^\s*(?:#\s*include\b.*|#\s*pragma\s+once\b.*)?$")  # on a line without comments
_INCLUDE = re.compile(r"^\s*#\s*include\b")
_PRELUDE_DIRECTIVE = re.compile(r"^\s*#\s*(?:include|pragma\s+once)\b")
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)", re.M)
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
COMPOSED_MARK = "// ksci: composed "  # then JSON: {"default": variant, "shapes": {shape_key: variant}}


@dataclass(frozen=True)
class Composed:
    """A composed source, or why there is none (`source` is None and `message` says why)."""

    source: str | None
    message: str = ""
    variants: int = 0

    @property
    def ok(self) -> bool:
        return self.source is not None


def point_key(point: dict) -> str:
    return json.dumps({"template": point["template"], "params": point["params"]}, sort_keys=True)


def compose_kernel(problem: Problem, dialect: str, plan: dict) -> Composed:
    """The source of one kernel made of the plan's points, or a refusal that says why."""
    dims = [k for k in problem.benchmarks[0] if k != "seed"] if problem.benchmarks else []
    missing = [d for d in dims if d not in problem.entry_args]
    if not dims or missing:
        return Composed(None, f"problem {problem.name}: shape keys {dims} are not all integer arguments of the entry")
    points = [plan["default"]] + [plan["shapes"][k] for k in sorted(plan["shapes"])]
    variants = list(dict.fromkeys(point_key(p) for p in points))  # default first: variant 0
    includes, bodies = [], []
    for index, key in enumerate(variants):
        point = json.loads(key)
        try:
            spec = problem.template(dialect, point["template"])
            source = render_kernel(spec, point["params"])
        except ProblemError as exc:
            return Composed(None, f"cannot render {point['template']} {point['params']}: {exc}")
        broken = spec.violations({**spec.default, **point["params"]})
        if broken:
            return Composed(None, f"{point['template']} {point['params']} violates {', '.join(broken)}")
        split = split_includes(source)
        if isinstance(split, str):
            return Composed(None, f"{dialect}/{point['template']} is not composable: {split}")
        includes += split[0]
        bodies.append(_wrap(split[1], problem.entry_name, index))
    dispatch = {}
    for key in sorted(plan["shapes"]):
        values = key.split("x")
        if len(values) != len(dims) or not all(v.isdigit() for v in values):
            return Composed(None, f"shape key {key!r} does not name the problem's dimensions {'x'.join(dims)}")
        dispatch[key] = variants.index(point_key(plan["shapes"][key]))
    mark = json.dumps({"default": 0, "shapes": dispatch}, sort_keys=True)
    parts = [f"{COMPOSED_MARK}{mark}", *dict.fromkeys(includes), "", *bodies, _entry(problem, dims, dispatch)]
    return Composed("\n".join(parts) + "\n", variants=len(variants))


def split_includes(source: str) -> tuple[list[str], str] | str:
    """(the leading #include lines, the rest), or why the source cannot be split so. The leading comments stay with
    the rest; `#pragma once` is dropped (the composed kernel is one file)."""
    lines = source.split("\n")
    code = _without_comments(source).split("\n")
    start = next((i for i, line in enumerate(code) if not _PRELUDE.match(line)), len(lines))
    for number in range(start, len(code)):
        if _INCLUDE.match(code[number]):
            return f"line {number + 1} includes {code[number].strip()!r} after code (all #includes must come first)"
    includes = [code[i].strip() for i in range(start) if _INCLUDE.match(code[i])]  # without comments: dedup
    kept = [lines[i] for i in range(start) if not _PRELUDE_DIRECTIVE.match(code[i])]
    return includes, "\n".join(kept + lines[start:])


def _without_comments(text: str) -> str:
    """The text with comments blanked, line breaks kept (so that line numbers still hold)."""
    return _COMMENTS.sub(lambda m: "\n" * m.group().count("\n"), text)


def _wrap(body: str, entry: str, index: int) -> str:
    defined = [name for name in dict.fromkeys(_DEFINE.findall(_without_comments(body))) if name != entry]
    undefs = "".join(f"#undef {name}\n" for name in defined)
    return (
        f"// ksci: variant {index}\n#define {entry} {entry}_v{index}\nnamespace ksci_v{index} {{\n{body}\n"
        f"}}  // namespace ksci_v{index}\n#undef {entry}\n{undefs}"
    )


def _entry(problem: Problem, dims: list[str], dispatch: dict[str, int]) -> str:
    args = ", ".join(problem.entry_args)
    lines = [f"{problem.entry_signature} {{"]
    for key, variant in dispatch.items():
        test = " && ".join(f"{d} == {v}" for d, v in zip(dims, key.split("x"), strict=True))
        lines.append(f"    if ({test}) return ksci_v{variant}::{problem.entry_name}_v{variant}({args});")
    lines.append(f"    return ksci_v0::{problem.entry_name}_v0({args});  // any other shape: the default variant")
    lines.append("}")
    return "\n".join(lines)


def plan_of(default: dict, by_shape: dict[str, dict]) -> dict:
    """A plan in its canonical form (shape keys sorted), as the lineage stores it."""
    return {
        "default": json.loads(point_key(default)),
        "shapes": {k: json.loads(point_key(by_shape[k])) for k in sorted(by_shape)},
    }


def composed_plan(source: str) -> dict | None:
    """The dispatch of a composed source ({"default": 0, "shapes": {shape_key: variant}}), or None."""
    first = source.split("\n", 1)[0]
    return json.loads(first[len(COMPOSED_MARK) :]) if first.startswith(COMPOSED_MARK) else None


def shape_keys(problem: Problem) -> list[str]:
    return [shape_key(s) for s in problem.benchmarks]
