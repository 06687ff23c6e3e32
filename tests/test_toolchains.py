"""Every shipped seed (rendered at several points of its space) and every solution compiles.

CUDA: nvcc for sm_90a (Hopper). HIP: Debian's hipcc (HIP 5.2, clang 15) knows gfx90a and gfx940 but not
gfx942 (MI300X), so the HIP sources are compile-checked for gfx940, the same CDNA3 instruction set;
production ROCm builds use --offload-arch=gfx942.
"""

from __future__ import annotations

import pytest
from sampling import uniform_points

from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import list_problems, load_problem

ARCH = {"cuda": "sm_90a", "rocm": "gfx940"}
TARGET_OF_DIALECT = {"cuda": "cuda", "hip": "rocm"}
MARK = {"cuda": pytest.mark.nvcc, "rocm": pytest.mark.hipcc}
POINTS_PER_TEMPLATE = 3  # the default plus random points of the space


def _template_points():
    for name in list_problems():
        for template in load_problem(name).templates:
            target = TARGET_OF_DIALECT[template.dialect]
            points = [template.default] + uniform_points(template, POINTS_PER_TEMPLATE - 1, f"{name}/{template.name}")
            for params in points:  # distinct: uniform_points never repeats a point or returns the default
                label = f"{name}-{template.dialect}-{template.name}-" + "-".join(f"{k}{v}" for k, v in params.items())
                yield pytest.param(template, params, target, id=label, marks=MARK[target])


def _solutions():
    for name in list_problems():
        problem = load_problem(name)
        for kind in ("correct", "wrong"):
            for path in problem.solutions(kind):
                target = "cuda" if path.suffix == ".cu" else "rocm"
                yield pytest.param(path, target, id=f"{name}-{kind}-{path.name}", marks=MARK[target])


@pytest.mark.parametrize(("template", "params", "target"), list(_template_points()))
def test_seed_template_compiles(template, params, target, compile_cache):
    result = compile_source(
        render_kernel(template, params), find_toolchain(target, ARCH[target]), ARCH[target], compile_cache
    )
    # A parameter combination may be rejected on purpose by a static_assert: that must say why.
    if not result.ok:
        assert "static assert" in result.log or "static_assert" in result.log, result.log[-3000:]
        pytest.skip(f"combination rejected by the template's static_assert: {params}")
    assert result.resources, f"no resource report parsed from:\n{result.log[-2000:]}"
    assert all(r.registers for r in result.resources)


@pytest.mark.parametrize(("path", "target"), list(_solutions()))
def test_solution_compiles_as_expected(path, target, compile_cache):
    expected = path.read_text().splitlines()[0].split("expect:")[1].strip()
    result = compile_source(path.read_text(), find_toolchain(target, ARCH[target]), ARCH[target], compile_cache)
    assert result.ok == (expected != "compile_error"), result.log[-3000:]
