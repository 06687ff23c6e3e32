"""Declared constraints (problem.yaml `constraints:`): what they may say, and that they agree with the templates.

The compile checks render every feasible point of a small space (a sample of SAMPLE for a large one) and compile
it with -c, in parallel; and they render one point per template that violates a constraint and check that the
template itself refuses it (a static_assert or #error), so the declared constraints and the template stay in step.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.constraints import ConstraintError, parse_constraint
from ksci.problem.render import render_kernel
from ksci.problem.spec import ProblemError, TemplateSpec, list_problems, load_problem

SAMPLE = 20  # feasible points compiled per template with a larger space
ENUMERATED = 500_000  # spaces up to this many points are enumerated; larger ones are sampled
ARCH = {"cuda": "sm_90a", "rocm": "gfx940"}  # as tests/test_toolchains.py: Debian's hipcc knows gfx940, not gfx942
TARGET_OF_DIALECT = {"cuda": "cuda", "hip": "rocm"}
NAMES = {"BM", "BN", "WARPS_M", "WARPS_N"}


@pytest.mark.parametrize(
    "text",
    [
        "WARPS_M * WARPS_N >= BM * BN // 2048",
        "BM % (16 * WARPS_M) == 0 and not BN < 64 or BM ** 2 > 1.5",
        "min(BM, BN) <= max(64, abs(-WARPS_N)) != 3",
        "-BM / 2 < +BN - 1",
    ],
)
def test_whitelisted_expressions_parse(text: str) -> None:
    assert parse_constraint(text, NAMES).text == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("BK > 1", "unknown name 'BK'"),
        ("__import__('os').system('true')", "only min"),
        ("BM.bit_length() > 1", "only min"),
        ("print(BM)", "only min"),
        ("min(BM, key=abs) > 1", "only min"),
        ("BM if BN else WARPS_M", "IfExp"),
        ("(lambda: 1)()", "only min"),
        ("[BM][0] > 1", "not allowed"),
        ("BM & 1 == 0", "BitAnd is not allowed"),
        ("BM in (64, 128)", "In is not allowed"),
        ("BM == 'x'", "only int and float literals"),
        ("BM == True", "only int and float literals"),
        ("min > 1", "unknown name 'min'"),
        ("BM >", "not a Python expression"),
        ("BM == 64; BN == 64", "not a Python expression"),
    ],
)
def test_anything_else_is_refused(text: str, reason: str) -> None:
    with pytest.raises(ConstraintError, match=reason):
        parse_constraint(text, NAMES)


def test_evaluation_is_arithmetic_on_the_point() -> None:
    tiles = parse_constraint("(BM // WARPS_M // 16) * (BN // WARPS_N // 8) <= 16", NAMES)
    assert tiles.holds({"BM": 128, "BN": 64, "WARPS_M": 4, "WARPS_N": 2})
    assert not tiles.holds({"BM": 128, "BN": 128, "WARPS_M": 1, "WARPS_N": 1})
    assert not parse_constraint("BM % (WARPS_M - 1) == 0", NAMES).holds({"BM": 64, "WARPS_M": 1})  # 0 divisor
    assert not parse_constraint("2 ** BM > 0", NAMES).holds({"BM": 10**9})  # refused, not computed
    assert parse_constraint("64 <= BM <= 128", NAMES).holds({"BM": 64})


def _problem_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: dict) -> None:
    spec = yaml.safe_load((Path(__file__).parent.parent / "kernels" / "rmsnorm" / "problem.yaml").read_text())
    spec["templates"] = {"cuda": [template]}
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "problem.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))


def test_a_bad_constraint_is_refused_at_load_naming_template_and_expression(tmp_path, monkeypatch) -> None:
    template = {"name": "tiles", "file": "t.cu.j2", "params": {"X": [1, 2]}, "default": {"X": 1}}
    _problem_with(tmp_path, monkeypatch, {**template, "constraints": ["X < 2", "open('/etc/passwd')"]})
    with pytest.raises(ProblemError, match=r"cuda template 'tiles': constraint \"open\('/etc/passwd'\)\": call"):
        load_problem("toy")


def test_the_default_must_satisfy_the_constraints(tmp_path, monkeypatch) -> None:
    template = {"name": "tiles", "file": "t.cu.j2", "params": {"X": [1, 2]}, "default": {"X": 2}}
    _problem_with(tmp_path, monkeypatch, {**template, "constraints": ["X < 2"]})
    with pytest.raises(ProblemError, match="'tiles': its default violates X < 2"):
        load_problem("toy")


def test_the_mma_rule_is_declared() -> None:
    mma = load_problem("fp8_gemm").template("cuda", "mma")
    points = [dict(zip(mma.params, v, strict=True)) for v in itertools.product(*mma.params.values())]
    assert (len(points), sum(map(mma.feasible, points))) == (72, 46)  # the problem.yaml comment's numbers
    assert mma.violations({**mma.default, "WARPS_M": 1, "WARPS_N": 2}) == [
        "(BM // WARPS_M // 16) * (BN // WARPS_N // 8) <= 16"
    ]


def _spaces():
    for name in list_problems():
        for template in load_problem(name).templates:
            target = TARGET_OF_DIALECT[template.dialect]
            mark = pytest.mark.nvcc if target == "cuda" else pytest.mark.hipcc
            yield pytest.param(template, target, id=f"{name}-{template.dialect}-{template.name}", marks=mark)


@pytest.mark.parametrize(("template", "target"), list(_spaces()))
def test_feasible_points_compile_and_the_template_refuses_a_violating_one(template, target) -> None:
    rng = random.Random(f"{template.dialect}/{template.name}")
    if math.prod(map(len, template.params.values())) <= ENUMERATED:
        space = [dict(zip(template.params, v, strict=True)) for v in itertools.product(*template.params.values())]
        feasible = [p for p in space if template.feasible(p)]
        points = feasible if len(feasible) <= SAMPLE else rng.sample(feasible, SAMPLE)
        violating = [p for p in space if not template.feasible(p)]
        refused = [rng.choice(violating)] if violating else []
    else:  # the wgmma spaces (fp8_gemm's 27 million points, fp8_gemm_kmajor's 829,440): drawn one at a time
        points, refused = [], []
        while len(points) < SAMPLE or not refused:
            point = {k: rng.choice(v) for k, v in template.params.items()}
            if template.feasible(point):
                points += [point] if len(points) < SAMPLE and point not in points else []
            elif not refused:
                refused = [point]
    checks = [(p, True) for p in points] + [(p, False) for p in refused]
    toolchain = _toolchain(target)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: _compiles(toolchain, template, c[0], target), checks))
    for (params, expected), (ok, log) in zip(checks, results, strict=True):
        assert ok == expected, f"{template.name} {params}: {'did not compile' if expected else 'compiled'}\n{log}"
        if not expected:
            assert "static_assert" in log or "static assert" in log or "#error" in log, log


def _compiles(toolchain, template, params: dict, target: str) -> tuple[bool, str]:
    """Compile to an object file only (-c): enough for the static_asserts and a quarter of a full build's time."""
    suffix = ".cu" if target == "cuda" else ".hip"
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / f"kernel{suffix}"
        source.write_text(render_kernel(template, params))
        command = toolchain.command(str(source), str(source) + ".o", ARCH[target], ("-c",))
        proc = subprocess.run(command, capture_output=True, text=True, env=toolchain.environment(), timeout=300)
        return proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def _toolchain(target: str):
    try:
        return find_toolchain(target, ARCH[target])  # the compiler that can build this arch, where that is asked
    except TypeError:
        return find_toolchain(target)


def _product_filtered(spec) -> list[dict]:
    points = (dict(zip(spec.params, v, strict=True)) for v in itertools.product(*spec.params.values()))
    return [p for p in points if spec.feasible(p)]


def test_the_proposers_enumeration_is_the_filtered_product_in_its_order() -> None:
    """ksci.proposers.space enumerates depth first, checking each constraint once its names have values: the same
    points in the same order as filtering the whole product, for every declared space it enumerates and for random
    small spaces whose constraints read any subset of the names (one reads none, one divides by a name that can be 0)."""
    from ksci.proposers.space import ENUMERATION_LIMIT, _enumerate

    declared = [t for n in list_problems() for t in load_problem(n).templates]
    enumerated = [t for t in declared if math.prod(map(len, t.params.values())) <= ENUMERATION_LIMIT]
    assert any(t.constraints for t in enumerated)
    for spec in enumerated:
        assert _enumerate(spec) == _product_filtered(spec), spec.name
    rng = random.Random(7)
    for trial in range(40):
        names = [f"P{i}" for i in range(rng.randint(1, 5))]
        params = {n: rng.sample(range(0, 9), rng.randint(1, 4)) for n in names}
        texts = ["1 < 2", f"8 // {names[-1]} >= 1"]
        texts += [f"{rng.choice(names)} + {rng.choice(names)} <= {rng.randint(2, 14)}" for _ in range(3)]
        texts += [f"{rng.choice(names)} % 2 == 0 or {rng.choice(names)} >= {rng.randint(0, 8)}"]
        constraints = tuple(parse_constraint(t, set(names)) for t in rng.sample(texts, rng.randint(0, len(texts))))
        spec = TemplateSpec("t", "cuda", Path("t.cu.j2"), params, {}, constraints)
        assert _enumerate(spec) == _product_filtered(spec), (trial, params, [c.text for c in constraints])
    assert _enumerate(TemplateSpec("t", "cuda", Path("t.cu.j2"), {}, {})) == [{}]
