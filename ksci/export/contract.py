"""What an exported op accepts: the problem's tensors (dtype, dimensions, memory order) and its shape contract.

The tensors come from problem.yaml's `dtypes` and `layouts` ("M x K/128, column-major": dimensions as expressions of
the shape's keys, then the memory order). The shape contract (the range and alignment of each dimension) is the one
the evaluation verifies held-out shapes from (ksci/problem/contract.py): problem.yaml's `shape_contract`, or, where a
problem declares none, one derived from its listed test and benchmark shapes.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from ksci.problem.contract import contract_of
from ksci.problem.spec import Problem, ProblemError, read_spec

_EXPRESSION = re.compile(r"^[a-z0-9_()+*/ -]+$")
_CEIL = re.compile(r"ceil\(([^()]*)\)")


@dataclass(frozen=True)
class DimRule:
    """One dimension of the contract: minimum <= value <= maximum, value % multiple == 0."""

    name: str
    minimum: int
    maximum: int
    multiple: int

    def problem(self, value: int) -> str | None:
        if self.minimum <= value <= self.maximum and value % self.multiple == 0:
            return None
        return f"{self.name}={value} is outside the shape contract ({self.describe()})"

    def describe(self) -> str:
        return f"{self.name} a multiple of {self.multiple} from {self.minimum} to {self.maximum}"


@dataclass(frozen=True)
class TensorSpec:
    """One tensor argument: dtype (a torch attribute name), its dimensions as Python expressions of the shape's
    keys, and its memory order ("row": the last dimension contiguous; "column": the first)."""

    name: str
    dtype: str
    dims: tuple[str, ...]
    order: str
    layout: str  # as problem.yaml writes it


def dimensions(problem: Problem) -> list[str]:
    """The shape's keys (the integer arguments of the entry point), in the declared shapes' order."""
    shapes = problem.benchmarks or problem.tests
    return [k for k in shapes[0] if k != "seed"]


def shape_contract(problem: Problem) -> dict[str, DimRule]:
    """Each dimension's range and alignment: the problem's shape contract (ksci.problem.contract.contract_of, the
    one the evaluation's held-out shapes are drawn from), declared in problem.yaml or derived from its shapes."""
    contract = contract_of(problem)
    return {
        dim: DimRule(dim, int(rule["min"]), int(rule["max"]), int(rule.get("multiple_of", 1)))
        for dim, rule in contract.items()
        if dim in dimensions(problem)
    }


def tensor_specs(problem: Problem, target: str) -> list[TensorSpec]:
    """Every tensor argument of the entry point (inputs, then outputs, in call order), from problem.yaml."""
    raw = read_spec(problem.root / "problem.yaml")
    layouts = raw.get("layouts") or {}
    dtypes = problem.dtypes.get(target) or {}
    dims = dimensions(problem)
    specs = []
    for name in problem.entry_args:
        if name == "stream" or name in dims:
            continue
        if name not in layouts or name not in dtypes:
            raise ProblemError(f"problem {problem.name}: tensor {name!r} has no layout or no {target} dtype")
        specs.append(_tensor_spec(name, dtypes[name], str(layouts[name]), dims, problem.name))
    return specs


def _tensor_spec(name: str, dtype: str, layout: str, dims: list[str], problem: str) -> TensorSpec:
    shape_text, _, order_text = layout.partition(",")
    order = "column" if "column-major" in order_text else "row"
    exprs = tuple(_expression(part, dims, f"{problem}: layout of {name}") for part in shape_text.split(" x "))
    return TensorSpec(name, dtype, exprs, order, layout.strip())


def _expression(text: str, dims: list[str], where: str) -> str:
    """`ceil(N/128)` -> `(-(-(n)//(128)))`, `K/128` -> `k//128`: integer Python over the shape's keys."""
    expr = text.strip()
    for dim in dims:
        expr = re.sub(rf"\b{re.escape(dim)}\b", dim, expr, flags=re.I)
    expr = expr.replace("/", "//")
    expr = _CEIL.sub(lambda m: "(-(-({})//({})))".format(*m.group(1).split("//", 1)), expr)
    if not _EXPRESSION.match(expr):
        raise ProblemError(f"{where}: cannot read the dimension {text.strip()!r}")
    try:
        evaluate(expr, {d: 256 for d in dims})
    except Exception as exc:
        raise ProblemError(f"{where}: cannot read the dimension {text.strip()!r} ({exc})") from None
    return expr


def evaluate(expr: str, shape: dict) -> int:
    """An expression of tensor_specs at a shape (the exported package evaluates them the same way)."""
    return int(eval(expr, {"__builtins__": {}}, dict(shape)))  # noqa: S307 - checked by _EXPRESSION


def held_out_shapes(problem: Problem, count: int = 4) -> list[dict]:
    """In-contract shapes the evaluation never ran: declared benchmark shapes with the first dimension (and, every
    other shape, the second) moved to a value no declared shape has, spread over the contract's range."""
    contract, dims = shape_contract(problem), dimensions(problem)
    declared = {d: {int(s[d]) for s in (*problem.tests, *problem.benchmarks)} for d in dims}
    base = problem.benchmarks or problem.tests
    shapes = []
    for i in range(count):
        shape = {d: int(base[(i * 5) % len(base)][d]) for d in dims}
        moved = dims[:2] if i % 2 and len(dims) > 1 else dims[:1]
        for dim in moved:
            shape[dim] = _unseen(contract[dim], declared[dim], (0.02, 0.3, 0.55, 0.85)[i % 4])
        if shape not in shapes:
            shapes.append(shape)
    return shapes


def _unseen(rule: DimRule, seen: set[int], share: float) -> int:
    """The first multiple of rule.multiple at or above `share` of the range that no declared shape has (the nearest
    declared value when every multiple is declared)."""
    start = rule.minimum + share * (rule.maximum - rule.minimum)
    value = max(rule.minimum, int(math.ceil(start / rule.multiple)) * rule.multiple)
    while value <= rule.maximum:
        if value not in seen:
            return value
        value += rule.multiple
    return rule.maximum


def contract_json(problem: Problem) -> dict:
    return {name: asdict(rule) for name, rule in shape_contract(problem).items()}
