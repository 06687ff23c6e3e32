"""The import's dry run of a gpu-mode task on the importing machine: every shape probed (gpumode_probe.probe) within
time limits, a shape too slow here deferred to where the problem runs, and the semantic checks (Semantics.kinds)
at the smallest test shape, or at a reduced copy of it where that is slow here."""

from __future__ import annotations

from ksci.importers.common import Unmappable
from ksci.importers.gpumode_probe import Budget, Semantics, probe, smallest
from ksci.importers.gpumode_shapes import Shapes
from ksci.importers.limits import time_limit

SHAPE_LIMIT_S = 15.0  # one shape's probe, other than the smallest test shape's
OTHER_SHAPES_S = 60.0  # all real runs of the other shapes together
FIRST_LIMIT_S = 40.0  # the smallest test shape's probe; past it, a reduced shape stands in
CHECK_FLOPS = 1e11  # a reference call the checks make (three or more) above this: they run at a reduced shape
REDUCE = 8  # a reduced shape: each size of 16 or more divided by this


def reduced(shape: dict, cases: dict) -> dict:
    """`shape` with each size of 16 or more divided by REDUCE (case indices and the seed kept)."""
    return {k: (v // REDUCE if k != "seed" and k not in cases and v >= 16 else v) for k, v in shape.items()}


def probe_all(
    ns: dict, shapes: Shapes, names: list[str] | None, budget: Budget, text: str
) -> tuple[list[dict | None], dict]:
    """Each benchmark and test shape probed (gpumode_probe.probe), the smallest test shape first and always; another
    shape whose probe takes over SHAPE_LIMIT_S on this machine, or whose real run finds OTHER_SHAPES_S spent, is
    deferred (None): its dims, flops and bytes are
    measured where the problem runs (GpuModeReference completes its row before the first draw). Where the smallest
    test shape itself takes over FIRST_LIMIT_S, a reduced copy of it (sizes divided by REDUCE) is probed instead
    and the semantic checks run there. Returns the probes and the one the checks use."""
    ordered = [*shapes.benchmarks, *shapes.tests]
    first = ordered.index(smallest(shapes.tests))
    probes: list[dict | None] = [None] * len(ordered)
    rest = Budget(OTHER_SHAPES_S)  # the other shapes' real runs: past it, each is deferred at once
    try:
        reference = _probe_or_defer(ns, ordered[first], shapes.cases, names, budget, FIRST_LIMIT_S)
        if reference is None:  # the smallest test is slow here: a reduced one stands in for the checks
            smaller = reduced(ordered[first], shapes.cases)
            try:
                if smaller == ordered[first]:
                    raise Unmappable("no reduced shape", f"{smaller} has no size of 16 or more")
                reference = probe(ns, smaller, shapes.cases, names, budget)
            except Unmappable:  # the task does not hold at a reduced size: its smallest test, within the budget
                reference = probes[first] = probe(ns, ordered[first], shapes.cases, names, budget)
        else:
            probes[first] = reference
        for i, shape in enumerate(ordered):
            if i != first or probes[first] is None:
                probes[i] = probes[i] or _probe_or_defer(ns, shape, shapes.cases, names, rest)
    except Unmappable as exc:
        if exc.failure.construct == "the reference does not run" and uses_nvfp4(text):
            raise blackwell_only() from None
        raise
    return probes, reference


def uses_nvfp4(text: str) -> bool:
    """Whether the reference calls torch._scaled_mm on FP4 (NVFP4), an operation of Blackwell GPUs only."""
    return "_scaled_mm" in text and "float4" in text


def blackwell_only(also: str = "") -> Unmappable:
    """The refusal of a task whose reference needs a Blackwell GPU; `also` names another limit it meets."""
    return Unmappable(
        "Blackwell-only operation",
        "the reference calls torch._scaled_mm on block-scaled FP4 (NVFP4), which runs on NVIDIA Blackwell "
        f"(sm_100) GPUs only: import it on one{also}",
    )


def run_checks(
    ns: dict, shapes: Shapes, names: list[str] | None, budget: Budget, out_names, probed: list[dict], reference: dict
) -> tuple[dict, dict, list[dict]]:
    """What each of the reference's outputs is (Semantics.kinds), checked at the reference shape, or where that is
    slow here, at a reduced copy of it (probed too, and put first); the kinds, the shape's probe and the probes.
    Slow means over FIRST_LIMIT_S, or, known before any real run, over CHECK_FLOPS by the meta probe's count: a
    native call (a bf16 GEMM on a CPU) cannot be stopped by the time limit until it returns."""
    smaller = reduced(reference["shape"], shapes.cases)
    heavy = reference["device"] == "meta" and reference["flops"] > CHECK_FLOPS and smaller != reference["shape"]
    if not heavy:
        try:
            with budget.real(f"the checks at {reference['shape']}"), time_limit(FIRST_LIMIT_S, _Deferred):
                return Semantics(ns, reference["shape"], shapes.cases, names).kinds(out_names), reference, probed
        except _Deferred:  # slow at that size here: the checks at a reduced copy of it
            if smaller == reference["shape"]:
                raise budget.refusal(f"the checks at {smaller}") from None
    try:
        small = probe(ns, smaller, shapes.cases, names, budget)
    except Unmappable:  # the task does not hold at a reduced size: the checks at its own shape, within the budget
        if not heavy:
            raise
        with budget.real(f"the checks at {reference['shape']}"):
            return Semantics(ns, reference["shape"], shapes.cases, names).kinds(out_names), reference, probed
    with budget.real(f"the checks at {smaller}"):
        return Semantics(ns, smaller, shapes.cases, names).kinds(out_names), small, [small, *probed]


class _Deferred(BaseException):  # noqa: N818 - not an Exception: the reference's own `except Exception` lets it pass
    """One shape's probe ran past its share of time."""


def _probe_or_defer(
    ns: dict, shape: dict, cases: dict, names: list[str] | None, budget: Budget, seconds: float = 0.0
) -> dict | None:
    try:
        with time_limit(seconds or SHAPE_LIMIT_S, _Deferred):
            return probe(ns, shape, cases, names, budget)
    except _Deferred:
        return None
    except Unmappable as exc:
        if exc.failure.construct == "reference too slow to probe":
            return None
        raise


def deferred_row(shape: dict) -> dict:
    return {
        "shape": {k: v for k, v in shape.items() if k != "seed"},
        "seed": shape["seed"],
        "deferred": f"not probed: over {SHAPE_LIMIT_S:.0f} s (or {OTHER_SHAPES_S:.0f} s for all) here; measured where it runs",
        "flops": None,
        "bytes": None,
    }
