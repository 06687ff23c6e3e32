"""`ksci import gpumode` on the constructs of gpu-mode's reference-kernels that a plain task does not have, each a
small task written for these tests (tests/data/gpumode/cases/, with utils.py one folder up as gpu-mode keeps it):
a check_implementation built on utils.verbose_allclose with two outputs, case parameters (a boolean, a string),
a reference that reads values, a ROCm-only import, an uninitialised output buffer, a strided output, shapes without
seeds, and nested data (a dataclass, a module whose cache is updated in place and returned, a dict of weights)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml

from ksci import cli
from ksci.importers.common import ImportFailure
from ksci.importers.gpumode import import_gpumode, task_hash
from ksci.importers.gpumode_shapes import SEED_BASE
from ksci.problem.spec import load_problem

CASES = Path(__file__).parent / "data" / "gpumode" / "cases"
IMPORTED = (
    "checked_by_allclose",
    "case_params",
    "value_reading",
    "uninit_buffer",
    "strided_output",
    "no_seed",
    "kv_cache",
)


@pytest.fixture(scope="module")
def dest(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("cases")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KSCI_KERNELS_DIR", str(dest))
        for name in IMPORTED:
            result = import_gpumode(CASES / name, dest=dest)
            assert not isinstance(result, ImportFailure), f"{name}: {result}"
        yield dest


@pytest.fixture
def search(dest, monkeypatch) -> Path:
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(dest))
    return dest


def _run(name: str, shape: dict | None = None) -> tuple:
    problem = load_problem(name)
    shape = shape or problem.tests[0]
    ref = problem.reference_module()
    tensors = ref.generate_input(shape, shape["seed"], "cuda", "cpu")
    inputs = {k: v for k, v in tensors.items() if k not in problem.outputs}
    return problem, tensors, ref.reference(inputs)


def test_a_check_built_on_verbose_allclose_gives_the_tolerance_and_two_outputs_are_mapped(search):
    problem, tensors, expected = _run("checked_by_allclose")
    assert problem.outputs == ("total", "peak")
    assert (problem.rtol, problem.atol) == (1e-3, 1e-4)  # the loosest of the check's two calls
    assert torch.allclose(expected["total"], tensors["data"].sum(dim=1))
    assert torch.equal(expected["peak"], tensors["data"].amax(dim=1))
    assert (search / "checked_by_allclose" / "imported" / "utils.py").is_file()  # kept beside the source


def test_case_parameters_are_int_encoded_constants_passed_to_the_entry_point(search):
    problem = load_problem("case_params")
    assert problem.entry_args[-3:] == ("has_bias", "activation", "stream")
    assert problem.tests[0] == {"n": 16, "k": 32, "seed": 1, "has_bias": 1, "activation": 0}
    cases = yaml.safe_load((search / "case_params" / "problem.yaml").read_text())["imported"]["cases"]
    assert cases == {"has_bias": [False, True], "activation": ["relu", "gelu"]}
    _, without, _ = _run("case_params", problem.tests[1])  # has_bias false: the task's own zero bias
    assert torch.equal(without["bias"], torch.zeros(32))
    _, with_bias, expected = _run("case_params", problem.tests[0])
    x, w, b = with_bias["x"], with_bias["w"], with_bias["bias"]
    assert b.abs().sum() > 0 and torch.allclose(expected["out"], torch.relu(x @ w + b), atol=1e-5)


def test_a_reference_that_reads_values_is_probed_on_real_tensors(search):
    problem, tensors, expected = _run("value_reading")
    spec = yaml.safe_load((search / "value_reading" / "problem.yaml").read_text())
    assert spec["imported"]["probed_on"] == ["cpu"]
    counts = torch.bincount(tensors["data"].long())
    assert torch.equal(expected["out"].long(), counts) and problem.atol == problem.rtol == 0


def test_an_uninitialised_buffer_that_the_reference_does_not_read_is_the_output(search):
    problem, tensors, expected = _run("uninit_buffer")
    assert problem.outputs == ("c",) and problem.entry_args[:3] == ("a", "b", "c")
    again = problem.reference_module().generate_input(problem.tests[0], problem.tests[0]["seed"], "cuda", "cpu")
    assert torch.equal(tensors["a"], again["a"]) and torch.equal(tensors["b"], again["b"])
    assert torch.allclose(expected["c"].float(), (tensors["a"] @ tensors["b"]).float())


def test_a_strided_output_is_a_dense_buffer_with_the_references_strides_recorded(search):
    problem, tensors, expected = _run("strided_output")
    spec = yaml.safe_load((search / "strided_output" / "problem.yaml").read_text())
    assert spec["imported"]["strides"]["out"] == [4 * 128 * 64, 64, 128 * 64, 1]  # (b, t, h, d) of a (b, h, t, d)
    assert "the reference returns it with strides (32768, 64, 8192, 1); values compared" in spec["layouts"]["out"]
    assert tensors["out"].is_contiguous() and tensors["out"].shape == expected["out"].shape == (1, 8, 2, 16)


def test_shapes_without_seeds_get_seeds_and_the_readme_says_so(search):
    problem = load_problem("no_seed")
    assert problem.tests[0]["seed"] == SEED_BASE and problem.benchmarks[0]["seed"] == SEED_BASE
    assert "the importer gave each one" in (search / "no_seed" / "README.md").read_text()


def test_nested_data_a_cache_updated_in_place_and_a_dict_of_weights(search):
    problem, tensors, expected = _run("kv_cache")
    assert problem.outputs == ("y", "full")
    assert tensors["weights_experts_weight"].shape == (2, 16, 16)  # the dict's experts, stacked
    cache = tensors["cache_data"].clone()
    x, proj, experts = tensors["x"], tensors["config_proj"], tensors["weights_experts_weight"]
    y = x @ proj * 0.5 + x @ experts[0] + x @ experts[1]
    assert torch.allclose(expected["y"], y, atol=1e-5)
    assert torch.equal(tensors["cache_data"], cache)  # the input stays; the updated cache is the output
    assert torch.equal(expected["full"][4:5], expected["y"]) and torch.equal(expected["full"][:4], cache[:4])


def test_a_rocm_only_import_is_refused_in_one_line_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(tmp_path))
    assert cli.main(["import", "gpumode", str(CASES / "rocm_only"), "--dest", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ROCm-only dependency" in err and "aiter" in err, err


def test_the_task_hash_changes_with_the_task_and_its_shared_utils(tmp_path):
    shutil.copytree(CASES / "no_seed", tmp_path / "tasks" / "no_seed")
    shutil.copy(CASES / "utils.py", tmp_path / "tasks" / "utils.py")
    task = tmp_path / "tasks" / "no_seed"
    before = task_hash(task)
    (tmp_path / "tasks" / "utils.py").write_text("# changed\n")
    assert task_hash(task) != before
