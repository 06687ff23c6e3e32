"""A problem's shape contract, and the held-out shapes verification draws from it.

The contract (`shape_contract:` in problem.yaml) is the domain of each dimension of a shape: `{min, max,
multiple_of}`. A kernel is asked to be right on every shape of it, not only on the listed ones: each verification
also checks a few in-contract shapes drawn fresh from a seed made in the parent (os.urandom), never listed and never
shown to the LLM (docs/evaluation.md, "Held-out shapes"). A problem without a contract (an imported one) gets one
derived from its listed shapes (derived_contract): each dimension between its smallest and largest listed value, in
steps of the greatest common divisor of its listed values; a dimension with one listed value stays fixed.

Torch-free: the parent draws the shapes, the harness child only checks them.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence

# The most work (product of the dimensions) a held-out shape may have, as a multiple of the largest listed test
# shape's: held-out shapes cost verification time like test shapes do, never like benchmark shapes.
WORK_CAP = 1.0
DEFAULT_COUNT = 3  # held-out shapes per verification
MAX_HELD_OUT = 64  # the most one verification may be asked for (ksci evaluate --held-out)
DRAW_TRIES = 200  # draws per shape before giving up on one that is new and under the work cap


def derived_contract(shapes: Iterable[dict]) -> dict[str, dict[str, int]]:
    """A contract from listed shapes alone: per dimension (every key but `seed`) its smallest and largest listed
    value and, as its step, the greatest common divisor of its listed values (a value of 0 counts as any)."""
    values: dict[str, list[int]] = {}
    for shape in shapes:
        for key, value in shape.items():
            if key != "seed" and isinstance(value, int):
                values.setdefault(key, []).append(value)
    contract = {}
    for key, listed in values.items():
        step = math.gcd(*listed) or 1
        contract[key] = {"min": min(listed), "max": max(listed), "multiple_of": step}
    return contract


def contract_of(problem) -> dict[str, dict[str, int]]:
    """The problem's declared shape contract, or one derived from its test and benchmark shapes."""
    declared = getattr(problem, "shape_contract", None)
    return dict(declared) if declared else derived_contract([*problem.tests, *problem.benchmarks])


def outside(contract: dict, shape: dict) -> str | None:
    """Why `shape` lies outside `contract` (`m = 96 is not a multiple of 64`), or None when it lies inside."""
    for key, rule in contract.items():
        value = shape.get(key)
        if not isinstance(value, int):
            return f"it has no {key}"
        if value < rule["min"] or value > rule["max"]:
            return f"{key} = {value} is not between {rule['min']} and {rule['max']}"
        if value % rule.get("multiple_of", 1):
            return f"{key} = {value} is not a multiple of {rule['multiple_of']}"
    return None


def draw_held_out(problem, count: int = DEFAULT_COUNT, rng: random.Random | None = None) -> list[dict]:
    """`count` distinct in-contract shapes that are not listed, each with a seed of its own, from `rng` (a
    random.SystemRandom by default: os.urandom, nothing a candidate can predict). Fewer where the contract leaves
    fewer: a contract of fixed dimensions has none to give.

    Each dimension is drawn log-uniformly over its range, so that small and large values are as likely, except that
    the i-th shape sets the i-th dimension (in an order drawn at random) to its largest listed test value: every
    dimension is held at its deep end once (a long reduction, a wide row: where narrow accumulators drift) while the
    others vary. No shape has more work than the largest listed test shape (WORK_CAP)."""
    rng = rng or random.SystemRandom()
    contract = contract_of(problem)
    listed = {_key(s) for s in (*problem.tests, *problem.benchmarks)}
    cap = WORK_CAP * max(_work(s, contract) for s in problem.tests)
    drawn: list[dict] = []
    order = rng.sample(sorted(contract), len(contract))
    for index in range(count):
        deep = order[index] if index < len(order) else None
        shape = _draw_one(contract, problem.tests, deep, cap, listed | {_key(s) for s in drawn}, rng)
        if shape is not None:
            drawn.append({**shape, "seed": rng.randrange(2**31)})
    return drawn


def _draw_one(contract: dict, tests: Sequence[dict], deep: str | None, cap: float, taken: set, rng) -> dict | None:
    """One new in-contract shape under the work cap; `deep`: the dimension set to its largest listed test value."""
    for _ in range(DRAW_TRIES):
        shape = {key: _value(rule, rng) for key, rule in contract.items()}
        if deep is not None:
            shape[deep] = max(int(t[deep]) for t in tests if isinstance(t.get(deep), int))
        if _key(shape) not in taken and _work(shape, contract) <= cap and outside(contract, shape) is None:
            return shape
    return None


def _value(rule: dict, rng) -> int:
    """A value of one dimension: log-uniform between its bounds, rounded to its step (uniform where min is 0)."""
    step = rule.get("multiple_of", 1)
    low, high = -(-rule["min"] // step), rule["max"] // step  # in steps
    if high <= low:
        return low * step
    if low == 0:
        return rng.randint(0, high) * step
    return min(high, max(low, int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))))) * step


def _work(shape: dict, contract: dict) -> float:
    return math.prod(max(1, int(shape.get(key, 1))) for key in contract)


def _key(shape: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in shape.items() if k != "seed"))


_HELD_OUT = re.compile(r"held-out shape \S+ seed \d+")


def hide_held_out(text: str) -> str:
    """`text` with every held-out shape and its seed replaced by `a held-out shape`: what the LLM's prompts and the
    report show of a verdict (the lineage keeps the shapes: the verdict's fingerprint `held_out`)."""
    return _HELD_OUT.sub("a held-out shape", text or "")
