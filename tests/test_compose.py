"""Composed kernels (ksci/problem/compose.py): template points by shape in one source, dispatched on the shape arguments."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ksci.backends.simulated import Simulator
from ksci.evaluate.screen.source import screen_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.compose import compose_kernel, composed_plan, plan_of, split_includes
from ksci.problem.spec import load_problem, shape_key

ARCH = {"cuda": "sm_90a", "rocm": "gfx940"}  # as tests/test_toolchains.py


def _fp8_plan(dialect: str = "cuda") -> tuple[dict, list[str]]:
    """naive for the first benchmark shape, an mma (mfma) point other than the default for the second, the
    default for the rest: three variants of two templates."""
    problem = load_problem("fp8_gemm")
    fast = "mma" if dialect == "cuda" else "mfma"
    spec = problem.template(dialect, fast)
    other = next(
        {**spec.default, k: v}
        for k, vs in spec.params.items()
        for v in vs
        if spec.feasible({**spec.default, k: v})
        if v != spec.default[k]
    )
    keys = [shape_key(s) for s in problem.benchmarks]
    default = {"template": fast, "params": spec.default}
    naive = {"template": "naive", "params": problem.template(dialect, "naive").default}
    by_shape = {k: default for k in keys} | {keys[0]: naive, keys[1]: {"template": fast, "params": other}}
    return plan_of(default, by_shape), keys


def test_the_composed_source_hoists_includes_and_dispatches_each_shape() -> None:
    problem = load_problem("fp8_gemm")
    plan, keys = _fp8_plan()
    composed = compose_kernel(problem, "cuda", plan)
    assert composed.ok and composed.variants == 3, composed.message
    source = composed.source
    assert composed_plan(source) == {"default": 0, "shapes": {k: 0 for k in keys} | {keys[0]: 1, keys[1]: 2}}
    head = source.split("// ksci: variant 0")[0]
    assert head.count("#include <cuda_runtime.h>") == 1 and source.count("#include") == head.count("#include")
    for v in range(3):
        assert f"#define fp8_gemm fp8_gemm_v{v}\nnamespace ksci_v{v} {{" in source
        assert f"}}  // namespace ksci_v{v}\n#undef fp8_gemm\n" in source
    entry = source[source.rindex(problem.entry_signature) :]
    m, n, k = keys[0].split("x")
    assert (
        f"if (m == {m} && n == {n} && k == {k}) return ksci_v1::fp8_gemm_v1(a, b, a_scale, b_scale, c, m, n, k" in entry
    )
    assert entry.rstrip().endswith(
        "return ksci_v0::fp8_gemm_v0(a, b, a_scale, b_scale, c, m, n, k, stream);  "
        "// any other shape: the default variant\n}"
    )
    assert screen_source(source).ok, screen_source(source)
    assert compose_kernel(problem, "cuda", plan).source == source  # deterministic


def test_macros_a_variant_defines_are_undefined_after_it() -> None:
    plan, _ = _fp8_plan("hip")
    source = compose_kernel(load_problem("fp8_gemm"), "hip", plan).source
    variant_1 = source[source.index("// ksci: variant 1") : source.index("// ksci: variant 2")]
    assert "#undef BLOCK_X\n#undef BLOCK_Y\n" in variant_1  # naive's #defines do not reach the next variant
    assert screen_source(source).ok


def test_refusals_are_values_that_say_why(tmp_path: Path) -> None:
    assert "line 4 includes '#include <b.h>' after code" in split_includes(
        "// x\n#include <a.h>\nint x;\n#include <b.h>"
    )
    includes, body = split_includes("// a\n/* b\n#include <no.h> */\n#pragma once\n#include <a.h>  // why\n\nint x;")
    assert includes == ["#include <a.h>"] and "#pragma once" not in body and "int x;" in body and "/* b" in body
    problem = load_problem("fp8_gemm")
    plan, keys = _fp8_plan()
    mma = problem.template("cuda", "mma")
    bad = {**mma.default, "WARPS_M": 1, "WARPS_N": 1}
    refused = compose_kernel(problem, "cuda", {**plan, "shapes": {keys[0]: {"template": "mma", "params": bad}}})
    assert not refused.ok and "violates (BM // WARPS_M // 16)" in refused.message
    unknown = compose_kernel(problem, "cuda", {**plan, "shapes": {"1x2": plan["default"]}})
    assert not unknown.ok and "'1x2' does not name the problem's dimensions mxnxk" in unknown.message
    missing = compose_kernel(problem, "cuda", {**plan, "default": {"template": "nope", "params": {}}})
    assert not missing.ok and "no cuda template 'nope'" in missing.message


def test_the_simulator_times_each_shape_as_its_variant_alone() -> None:
    problem = load_problem("fp8_gemm")
    plan, keys = _fp8_plan()
    recording = Path(__file__).parent / "data" / "fp8_gemm_h200_recording.json"
    simulator = Simulator(recording)
    source = compose_kernel(problem, "cuda", plan).source
    verdict = simulator.run(problem, source, simulator.compile(source, "cuda", "sm_90a"), ("benchmark",))
    times = {shape_key(t.shape): t.kernel.median_us for t in verdict.timings}
    recorded = {(r["template"], json.dumps(r["params"], sort_keys=True)): r for r in json.loads(recording.read_text())}
    default = recorded[("mma", json.dumps(plan["default"]["params"], sort_keys=True))]["shape_times"]
    assert all(times[k] == default[k] for k in keys[2:])
    assert times[keys[0]] != default[keys[0]]  # naive's time there


def _compile(source: str, target: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / ("kernel.cu" if target == "cuda" else "kernel.hip")
    path.write_text(source)
    try:
        toolchain = find_toolchain(target, ARCH[target])
    except TypeError:
        toolchain = find_toolchain(target)
    command = toolchain.command(str(path), str(path) + ".o", ARCH[target], ("-c",))
    return subprocess.run(command, capture_output=True, text=True, env=toolchain.environment(), timeout=300)


@pytest.mark.nvcc
def test_a_composition_of_naive_and_mma_points_compiles_with_one_c_entry(tmp_path: Path) -> None:
    plan, _ = _fp8_plan()
    proc = _compile(compose_kernel(load_problem("fp8_gemm"), "cuda", plan).source, "cuda", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    symbols = subprocess.run(["nm", str(tmp_path / "kernel.cu.o")], capture_output=True, text=True).stdout
    assert re.search(r" T fp8_gemm$", symbols, re.M)  # the entry point keeps C linkage, unmangled


@pytest.mark.nvcc
def test_rmsnorm_templates_without_a_namespace_compose_too(tmp_path: Path) -> None:
    problem = load_problem("rmsnorm")
    keys = [shape_key(s) for s in problem.benchmarks]
    naive = {"template": "naive", "params": problem.template("cuda", "naive").default}
    vectorized = {"template": "vectorized", "params": {"THREADS": 512, "ROWS_PER_BLOCK": 2}}
    plan = plan_of(vectorized, {keys[0]: naive, keys[1]: vectorized})
    proc = _compile(compose_kernel(problem, "cuda", plan).source, "cuda", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.hipcc
def test_a_composition_of_naive_and_mfma_points_compiles_for_hip(tmp_path: Path) -> None:
    plan, _ = _fp8_plan("hip")
    proc = _compile(compose_kernel(load_problem("fp8_gemm"), "hip", plan).source, "rocm", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
