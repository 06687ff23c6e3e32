"""Which input sets verification checks: the profiles, their seeds and, after timing, which test shapes.

Torch-free, so that the parent (ksci.evaluate.judge.classify.expected_reports) counts the checks an honest run makes
from the same code the child (ksci/evaluate/harness/child.py) checks them by.
"""

from __future__ import annotations

TRIAL_SEED_STEP = 7919
PROFILE_SEED_STEP = 104_729  # seeds of the extra input profiles: apart from every trial's


def verification_plan(problem) -> list[tuple[str, list[int]]]:
    """(profile, seed steps) in the order verified: `spec` on `trials` seeds, each other profile on one seed of its
    own."""
    plan = [("spec", [trial * TRIAL_SEED_STEP for trial in range(problem.trials)])]
    extra = [p for p in problem.inputs if p != "spec"]
    plan += [(profile, [PROFILE_SEED_STEP * (i + 1)]) for i, profile in enumerate(extra)]
    return plan


def held_out_plan(problem) -> list[tuple[str, int]]:
    """(profile, seed step) each held-out shape is checked on (ksci/problem/contract.py): `spec`, then the first other
    declared profile, one input set each."""
    other = [p for p in problem.inputs if p != "spec"][:1]
    return [("spec", 0), *((profile, PROFILE_SEED_STEP) for profile in other)]


def recheck_shapes(tests: list[dict] | tuple[dict, ...]) -> list[dict]:
    """The test shapes the extra profiles are checked on again after timing (before timing: every test shape).

    The check after timing catches a kernel that changes once warm (after many calls); every code path a tiled
    kernel picks by shape is still exercised when, for each dimension, the shapes with its smallest value, its
    largest value and its least aligned value between those (fewest trailing zero bits, the larger on a tie: partial
    tiles, uneven split-K) are checked. For fp8_gemm that is 6 of 11 test shapes (docs/evaluation.md); order as in `tests`."""
    keys = sorted({key for shape in tests for key in shape if key != "seed"})
    chosen: set[int] = set()
    for key in keys:
        having = [i for i, shape in enumerate(tests) if isinstance(shape.get(key), int)]
        if not having:
            continue
        values = {i: tests[i][key] for i in having}
        chosen.add(min(having, key=lambda i: values[i]))
        chosen.add(max(having, key=lambda i: values[i]))
        inner = [i for i in having if min(values.values()) < values[i] < max(values.values())] or having
        chosen.add(max(inner, key=lambda i: (-_trailing_zero_bits(values[i]), values[i])))
    return [tests[i] for i in sorted(chosen)]


def _trailing_zero_bits(value: int) -> int:
    return (value & -value).bit_length() - 1 if value else 64
