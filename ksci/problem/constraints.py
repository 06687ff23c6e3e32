"""Declared constraints of a template's parameter space: small boolean expressions over its parameter names.

A template entry of problem.yaml may list `constraints:`, for example `"WARPS_M * WARPS_N >= BM * BN // 2048"`.
Each is parsed once with `ast` and checked against a whitelist: names of the template's parameters, int and float
literals, + - * / // % **, comparisons, and / or / not, parentheses, and calls of min, max and abs. Anything else is
refused when the problem is loaded. Evaluation walks the checked tree itself (no eval): a constraint can only
compute with the point's values.
"""

from __future__ import annotations

import ast
import operator
import threading
from dataclasses import dataclass, field

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_CALLS = {"min": min, "max": max, "abs": abs}
# CPython 3.11's ast.parse is not safe in concurrent threads ("AST constructor recursion depth mismatch"), and
# problems are loaded in many of Prefect's task threads at once: parses are serialised and remembered.
_PARSE_LOCK = threading.Lock()
_PARSED: dict[tuple[str, frozenset[str]], Constraint | ConstraintError] = {}
MAX_EXPONENT = 64  # ** with a larger exponent is an error, not an hour of big-integer arithmetic


class ConstraintError(ValueError):
    """A constraint that is not a whitelisted expression over the template's parameters."""


@dataclass(frozen=True)
class Constraint:
    text: str
    tree: ast.Expression = field(compare=False, repr=False)

    def names(self) -> frozenset[str]:
        """The parameter names the constraint reads (not the called min, max and abs)."""
        callees = {id(n.func) for n in ast.walk(self.tree) if isinstance(n, ast.Call)}
        return frozenset(n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and id(n) not in callees)

    def holds(self, params: dict) -> bool:
        """Whether the point satisfies the constraint; an expression that cannot be computed (division by zero,
        an exponent past MAX_EXPONENT) counts as violated."""
        try:
            return bool(_value(self.tree.body, params))
        except (ZeroDivisionError, OverflowError, ConstraintError, TypeError):
            return False


def parse_constraint(text: str, names: set[str]) -> Constraint:
    """Parse and check one constraint; raises ConstraintError saying what is not allowed."""
    if not isinstance(text, str):
        raise ConstraintError(f"{text!r} is not a string")
    with _PARSE_LOCK:
        key = (text, frozenset(names))
        if key not in _PARSED:
            try:
                _PARSED[key] = _parse(text, names)
            except ConstraintError as exc:
                _PARSED[key] = exc
        parsed = _PARSED[key]
    if isinstance(parsed, ConstraintError):
        raise ConstraintError(str(parsed))
    return parsed


def _parse(text: str, names: set[str]) -> Constraint:
    if not isinstance(text, str):
        raise ConstraintError(f"{text!r} is not a string")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(f"not a Python expression ({exc.msg})") from None
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        _check_node(node, names, callees)
    return Constraint(text, tree)


def _check_node(node: ast.AST, names: set[str], callees: set[int]) -> None:
    if isinstance(node, ast.Name):
        if node.id not in (_CALLS if id(node) in callees else names):
            known = ", ".join(sorted(names)) or "none"
            raise ConstraintError(f"unknown name {node.id!r} (the template's parameters: {known})")
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ConstraintError(f"literal {node.value!r}: only int and float literals are allowed")
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS or node.keywords:
            raise ConstraintError(f"call {ast.unparse(node)!r}: only min(...), max(...) and abs(...) are allowed")
    elif isinstance(node, ast.BinOp | ast.UnaryOp | ast.Compare | ast.BoolOp):
        ops = node.ops if isinstance(node, ast.Compare) else [node.op]
        if not all(type(op) in _BINARY or type(op) in _UNARY or type(op) in _COMPARE or _is_bool(op) for op in ops):
            raise ConstraintError(f"operator {type(ops[0]).__name__} is not allowed")
    elif not isinstance(node, ast.Expression | ast.Load | ast.operator | ast.unaryop | ast.cmpop | ast.boolop):
        raise ConstraintError(f"{type(node).__name__} ({ast.unparse(node)!r}) is not allowed")


def _is_bool(op: ast.AST) -> bool:
    return isinstance(op, ast.And | ast.Or)


def _value(node: ast.AST, params: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise ConstraintError(f"no value for {node.id}")
        return params[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, params), _value(node.right, params)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ConstraintError(f"exponent {right} is larger than {MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_value(node.operand, params))
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_value(v, params) for v in node.values)
        return any(_value(v, params) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _value(node.left, params)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _value(comparator, params)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        return _CALLS[node.func.id](*(_value(a, params) for a in node.args))
    raise ConstraintError(f"{type(node).__name__} is not allowed")
