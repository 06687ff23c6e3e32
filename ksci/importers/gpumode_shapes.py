"""A gpu-mode task's shapes (task.yml's `tests` and `benchmarks`) in problem.yaml's terms: the one place that reads
them, so a shape contract can be derived here too.

- Sizes (ints) stay as they are and are passed to the entry point as ints.
- Parameters that select a case rather than a size are problem constants passed as typed int arguments: a boolean
  as 0 or 1, a string as its index in the task's list of that key's values (in order of first appearance; the list
  is `imported.cases` in problem.yaml and the README). One problem keeps the task's whole benchmark set under one
  ranking, and a kernel sees which case it runs (trimul's `nomask`, linalg's `case`); specialising per case would
  split one task into as many problems. generate_input gets the task's own values back.
- A list-valued parameter (nvfp4 grouped GEMM's per-group `m=[96, 128]`) is refused: the entry point takes
  scalars, and a per-group size list would need an array argument.
- A shape without a seed gets one, the same for every import (SEED_BASE + its index in its list), and the README
  says so: gpu-mode's runner seeds such tasks itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ksci.importers.common import Unmappable

SEED_BASE = 4242


@dataclass(frozen=True)
class Shapes:
    tests: list[dict]  # int-valued, seed included: problem.yaml's shapes
    benchmarks: list[dict]
    cases: dict[str, list]  # key -> the task's values, in the order their index encodes
    seeded: bool  # True where the importer supplied seeds


def read_shapes(task: dict, defaults: dict | None = None) -> Shapes:
    """The task's shapes; a key some shapes leave out takes generate_input's default there (`defaults`)."""
    raw = {key: _raw(task, key) for key in ("tests", "benchmarks")}
    every = raw["tests"] + raw["benchmarks"]
    present = {k for s in every for k in s}
    for shape in every:
        shape.update({k: defaults[k] for k in present - set(shape) if k in (defaults or {})})
    cases = _cases(every)
    seeded = any("seed" not in s for s in every)
    out = {key: [_encode(s, cases, i) for i, s in enumerate(shapes)] for key, shapes in raw.items()}
    order = list(out["benchmarks"][0])
    keys = {frozenset(s) for s in out["tests"] + out["benchmarks"]}
    if len(keys) != 1:
        raise Unmappable("task.yml shapes", "every test and benchmark shape must have the same keys")
    ordered = {key: [{k: s[k] for k in order} for s in shapes] for key, shapes in out.items()}  # one key order
    return Shapes(ordered["tests"], ordered["benchmarks"], cases, seeded)


def decode(shape: dict, cases: dict[str, list]) -> dict:
    """The task's own keyword arguments for generate_input: case indices back to their values, the seed kept."""
    return {k: (cases[k][v] if k in cases else v) for k, v in shape.items()}


def _raw(task: dict, key: str) -> list[dict]:
    shapes = task.get(key)
    if not shapes or not all(isinstance(s, dict) for s in shapes):
        raise Unmappable(f"task.yml {key}", f"expected a non-empty list of dicts under {key}:")
    for shape in shapes:
        lists = [f"{k}={v!r}" for k, v in shape.items() if isinstance(v, list | tuple | dict)]
        if lists:
            raise Unmappable(
                "list-valued shape parameter",
                f"{key}: {', '.join(lists)[:120]}: the entry point takes scalars (a per-group size list would need "
                "an array argument)",
            )
        odd = [
            f"{k}={v!r}"
            for k, v in shape.items()
            if not isinstance(v, int | str) or (k == "seed" and type(v) is not int)
        ]
        if odd:
            raise Unmappable("shape value", f"{key}: {', '.join(odd)}: sizes, booleans and strings are supported")
    return [dict(s) for s in shapes]


def _cases(shapes: list[dict]) -> dict[str, list]:
    cases: dict[str, list] = {}
    for shape in shapes:
        for k, v in shape.items():
            if type(v) is not int and k != "seed":
                values = cases.setdefault(k, [False, True] if isinstance(v, bool) else [])
                if v not in values:
                    values.append(v)
    for k, values in cases.items():
        if any(type(v) is int for s in shapes for kk, v in s.items() if kk == k):
            raise Unmappable("shape value", f"{k} is a size in some shapes and a case in others: {values}")
    return cases


def _encode(shape: dict, cases: dict[str, list], index: int) -> dict:
    out = {k: (cases[k].index(v) if k in cases else v) for k, v in shape.items()}
    if "seed" not in out:
        out["seed"] = SEED_BASE + index
    return out
