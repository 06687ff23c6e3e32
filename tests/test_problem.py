import pytest

from ksci.problem.render import check_params, render_kernel
from ksci.problem.spec import ProblemError, has_entry_point, list_problems, load_problem, shape_key


def test_shipped_problems_load():
    assert {"fp8_gemm", "rmsnorm"} <= set(list_problems())
    for name in list_problems():
        problem = load_problem(name)
        assert problem.tests and problem.benchmarks
        assert all("seed" in s for s in problem.tests + problem.benchmarks)
        assert "stream" in problem.entry_args and set(problem.outputs) <= set(problem.entry_args)
        assert set(problem.dtypes) == {"cuda", "rocm"}
        for dialect in ("cuda", "hip"):
            assert problem.templates_for(dialect), f"{name} ships no {dialect} seed template"


def test_fp8_gemm_matches_the_task_definition():
    p = load_problem("fp8_gemm")
    assert len(p.tests) == 11 and len(p.benchmarks) == 18
    assert (p.rtol, p.atol) == (2e-2, 1e-3)
    assert p.tests[0] == {"m": 64, "n": 64, "k": 128, "seed": 6635}
    assert {shape_key(s) for s in p.benchmarks} >= {"1024x1536x7168", "6144x4096x512"}
    assert p.dtypes["rocm"]["a"] == "float8_e4m3fnuz" and p.dtypes["cuda"]["a"] == "float8_e4m3fn"
    assert [t.name for t in p.templates_for("cuda")][:1] == ["naive"]


def test_unknown_problem_is_a_clear_error():
    with pytest.raises(ProblemError, match="unknown problem 'nope'.*fp8_gemm"):
        load_problem("nope")


def test_entry_point_detection():
    assert has_entry_point('extern "C" int fp8_gemm(const void* a) { return 0; }', "fp8_gemm")
    assert has_entry_point('extern "C" {\nint fp8_gemm(void* s);\n}', "fp8_gemm")
    assert not has_entry_point("int fp8_gemm(const void* a) { return 0; }", "fp8_gemm")
    assert not has_entry_point('extern "C" int fp8_gemm2(void* a);', "fp8_gemm")


def test_template_parameters_are_checked():
    template = load_problem("fp8_gemm").templates_for("cuda")[0]
    name = next(iter(template.params))
    with pytest.raises(ProblemError, match="is not one of"):
        check_params(template, {name: 12345})
    with pytest.raises(ProblemError, match="no parameter"):
        check_params(template, {"NOT_A_PARAM": 1})
    assert check_params(template, {}) == template.default


def test_render_states_its_provenance_and_fills_every_parameter():
    for name in list_problems():
        for template in load_problem(name).templates:
            source = render_kernel(template)
            assert source.startswith(f"// ksci: rendered from {template.dialect}/{template.name}")
            assert "{{" not in source and "{%" not in source
            assert has_entry_point(source, load_problem(name).entry_name)
