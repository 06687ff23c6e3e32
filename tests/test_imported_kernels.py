"""The hand-written kernels of the imported test problems (tests/support/imported_problems.py) against the
signatures the importers wrote: each passes the static screen and defines the entry point; nvcc compiles each;
on a GPU the correct one is `ok` and the wrong one `wrong`, through the one harness."""

from __future__ import annotations

import pytest
from support.imported_problems import expected, import_all, kernels, sources

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.screen.source import screen_source
from ksci.evaluate.stage_order import evaluate_source
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.spec import has_entry_point, load_problem

CASES = [(name, kind) for name in sorted(sources()) for kind in ("correct", "wrong")]


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    dest = tmp_path_factory.mktemp("imported")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KSCI_KERNELS_DIR", str(dest))
        import_all(dest)
        yield dest


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_kernel_defines_the_entry_point_and_passes_the_screen(search, name, kind):
    path = kernels(name)[kind]
    text = path.read_text()
    assert expected(path) == ("ok" if kind == "correct" else "wrong")
    assert has_entry_point(text, name)
    assert f"int {name}(" in text and all(arg in text for arg in load_problem(name).entry_args)
    assert screen_source(text).ok, screen_source(text).message


@pytest.mark.nvcc
@pytest.mark.parametrize(("name", "kind"), CASES)
def test_kernel_compiles_with_nvcc(search, tmp_path, name, kind):
    result = compile_source(kernels(name)[kind].read_text(), find_toolchain("cuda", "sm_90a"), "sm_90a", tmp_path)
    assert result.ok, result.log[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "kind"), CASES)
def test_kernel_gets_its_verdict_on_the_gpu(search, gpu_target, name, kind):
    path = kernels(name)[kind]
    options = EvaluationOptions(target=gpu_target, phases=("verify",), time_baselines=False, timeout_s=600)
    verdict = evaluate_source(load_problem(name), path.read_text(), options)
    assert str(verdict.status) == expected(path), f"{verdict.status}: {verdict.message}\n{verdict.harness_log[-2000:]}"
    if kind == "correct":
        assert verdict.status == Status.OK and verdict.checks and all(c.ok for c in verdict.checks)
