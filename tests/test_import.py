"""`ksci import kernelbench|gpumode`: the problems of tests/data/ (written for these tests in each format) become
problem folders that every command accepts; what cannot be mapped is refused with exit code 2, one line on stderr,
and nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from ksci import cli
from ksci.importers.common import ImportFailure
from ksci.importers.gpumode import import_gpumode
from ksci.importers.kernelbench import import_kernelbench
from ksci.problem.spec import list_problems, load_problem
from ksci.proposers.optuna_search import propose_tuning
from ksci.proposers.space import needs_template, space_note

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
KERNELBENCH = sorted((DATA / "kernelbench").glob("*.py"))
GPUMODE = [DATA / "gpumode" / "fp8_mm"]
KERNELBENCH_ERRORS = {
    "two_outputs.py": "several outputs: forward returns a tuple of 2 (",
    "inplace_relu.py": "in-place semantics",
    "dropout_forward.py": "randomness inside forward: two calls on the same inputs differ: needs training mode: dropout (p=0.5)",
    "complex_fft.py": "unsupported dtype complex64",
}
GPUMODE_ERRORS = {
    "check_rejects": "the task's check rejects its reference",
    "list_shape": "list-valued shape parameter",
    "nvfp4_grouped": "Blackwell-only operation",  # named before its list-valued sizes, off a Blackwell GPU
    "inplace_input": "in-place semantics",
    "complex_output": "unsupported dtype complex64",
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """Every test problem imported into one folder, which is then the whole search path."""
    dest = tmp_path_factory.mktemp("imported")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KSCI_KERNELS_DIR", str(dest))
        for path in KERNELBENCH:
            assert not isinstance(import_kernelbench(path, dest=dest), ImportFailure), path
        for path in GPUMODE:
            assert not isinstance(import_gpumode(path, dest=dest), ImportFailure), path
        yield dest


@pytest.fixture
def search(imported, monkeypatch) -> Path:
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(imported))
    return imported


def _run(problem, shape) -> tuple[dict, dict]:
    ref = problem.reference_module()
    tensors = ref.generate_input(shape, shape["seed"], "cuda", "cpu")
    inputs = {k: v for k, v in tensors.items() if k not in problem.outputs}
    return tensors, ref.reference(inputs)


def test_every_imported_problem_is_listed_and_loads(search):
    names = [p.stem for p in KERNELBENCH] + [p.name for p in GPUMODE]
    assert list_problems() == sorted(names)
    for name in names:
        problem = load_problem(name)
        assert problem.templates == () and problem.entry_args[-1] == "stream"
        assert f'extern "C" int {name}(' in problem.entry_signature


@pytest.mark.parametrize("path", KERNELBENCH, ids=lambda p: p.stem)
def test_kernelbench_reference_runs_on_the_cpu_and_is_deterministic(search, path):
    problem = load_problem(path.stem)
    assert len(problem.benchmarks) == 1 and len(problem.tests) == 2  # a smaller shape, then the file's own
    small, bench = problem.tests
    assert {k: v for k, v in bench.items() if k != "seed"} == {
        k: v for k, v in problem.benchmarks[0].items() if k != "seed"
    }
    assert all(small[k] <= bench[k] for k in small if k != "seed") and small != bench
    tensors, expected = _run(problem, small)
    again, _ = _run(problem, small)
    assert all(torch.equal(tensors[k], again[k]) for k in tensors if k not in problem.outputs)
    (name,) = problem.outputs
    assert expected[name].shape == tensors[name].shape and torch.isfinite(expected[name]).all()
    assert set(tensors) == {a for a in problem.entry_args if a in problem.dtypes["cuda"]}
    ref = problem.reference_module()
    assert ref.bytes_moved(bench) > ref.bytes_moved(small) > 0


def test_kernelbench_parameters_are_inputs_drawn_from_the_seed(search):
    problem = load_problem("level2_gemm_multiply_leakyrelu")
    assert problem.entry_args == (
        "x", "gemm_weight", "gemm_bias", "out", "batch_size", "in_features", "out_features", "stream"
    )  # fmt: skip
    shape = problem.tests[0]
    tensors, expected = _run(problem, shape)
    y = tensors["x"] @ tensors["gemm_weight"].T + tensors["gemm_bias"]
    y = torch.nn.functional.leaky_relu(y * 2.0, 0.1)
    assert torch.allclose(expected["out"], y, atol=1e-5)
    other = problem.reference_module().generate_input(shape, shape["seed"] + 1, "cuda", "cpu")
    assert not torch.equal(other["gemm_weight"], tensors["gemm_weight"])
    assert problem.reference_module().flops(problem.benchmarks[0]) == 2 * 128 * 1024 * 512
    assert problem.tolerance("cuda").rtol == problem.tolerance("cuda").atol == 1e-2  # KernelBench's own


def test_gpumode_task_maps_its_shapes_layouts_and_tolerance(search):
    problem = load_problem("fp8_mm")
    assert problem.entry_args == ("a", "b", "a_scale", "b_scale", "c", "m", "n", "k", "stream")
    assert problem.outputs == ("c",) and len(problem.tests) == 4 and len(problem.benchmarks) == 2
    assert problem.tests[0] == {"m": 64, "n": 64, "k": 128, "seed": 6635}
    assert (problem.rtol, problem.atol) == (2e-2, 1e-3)
    assert problem.dtypes["cuda"]["a"] == "float8_e4m3fnuz" and problem.dtypes["cuda"]["c"] == "bfloat16"
    spec = (search / "fp8_mm" / "problem.yaml").read_text()
    assert "column-major" in spec and "c: 1024 x 1536 at the first benchmark, row-major" in spec
    shape = problem.tests[2]
    tensors, expected = _run(problem, shape)
    a, b = tensors["a"].float(), tensors["b"].float()
    assert tensors["a"].stride() == (1, shape["m"])  # column-major, as the task makes it
    sa = tensors["a_scale"].repeat_interleave(128, 1)[:, : shape["k"]]
    sb = tensors["b_scale"].repeat_interleave(128, 0).repeat_interleave(128, 1)[: shape["n"], : shape["k"]]
    assert torch.allclose(expected["c"].float(), ((a * sa) @ (b * sb).T).bfloat16().float())


def _cli(*args, env=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "ksci.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env)


@pytest.mark.parametrize(("fmt", "source", "construct"), [
    *(("kernelbench", DATA / "kernelbench" / "errors" / f, c) for f, c in KERNELBENCH_ERRORS.items()),
    *(("gpumode", DATA / "gpumode" / "errors" / d, c) for d, c in GPUMODE_ERRORS.items()),
], ids=lambda v: v.name if isinstance(v, Path) else None)  # fmt: skip
def test_what_cannot_be_mapped_is_refused_in_one_line_and_nothing_is_written(
    tmp_path, monkeypatch, capsys, fmt, source, construct
):
    dest = tmp_path / "dest"
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(dest))
    assert cli.main(["import", fmt, str(source), "--dest", str(dest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ksci: error: cannot import") and construct in err, err
    assert not dest.exists() or not any(dest.iterdir())


def test_cli_import_lists_the_problem_and_refuses_a_second_one_of_that_name(tmp_path):
    env = {"KSCI_KERNELS_DIR": str(tmp_path)}
    source = DATA / "kernelbench" / "level1_swish.py"
    out = _cli("import", "kernelbench", str(source), "--name", "swish", "--dest", str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr
    assert "swish" in _cli("problems", env=env).stdout
    again = _cli("import", "kernelbench", str(source), "--name", "swish", "--dest", str(tmp_path), env=env)
    assert again.returncode == 2 and "exists" in again.stderr
    forced = _cli("import", "kernelbench", str(source), "--name", "swish", "--dest", str(tmp_path), "--force", env=env)
    assert forced.returncode == 0, forced.stderr


def test_dest_outside_kernels_is_registered_so_every_command_finds_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KSCI_KERNELS_DIR", raising=False)
    monkeypatch.setattr("ksci.problem.spec.REGISTRY", tmp_path / "problem_dirs")
    dest = tmp_path / "mine"
    assert cli.main(["import", "gpumode", str(GPUMODE[0]), "--name", "fp8_mm_elsewhere", "--dest", str(dest)]) == 0
    assert (tmp_path / "problem_dirs").read_text().strip() == str(dest.resolve())
    assert "fp8_mm_elsewhere" in list_problems() and load_problem("fp8_mm_elsewhere").root == dest / "fp8_mm_elsewhere"
    assert cli.main(["render", "--problem", "fp8_mm_elsewhere", "--template", "x"]) == 2  # known; no such template
    assert "has no cuda template 'x' (known: none)" in capsys.readouterr().err


def test_the_tuning_proposer_says_it_needs_a_template_and_where(search):
    out = _cli(
        "evolve",
        "--problem",
        "level1_swish",
        "--proposer",
        "tuning",
        "--simulate",
        env={"KSCI_KERNELS_DIR": str(search)},
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no cuda seed template" in out.stderr and "templates/cuda/NAME.cu.j2" in out.stderr
    assert "--proposer llm" in out.stderr


def test_the_tuning_proposer_proposes_nothing_and_its_note_says_why(search):
    problem = load_problem("fp8_mm")
    assert propose_tuning(problem, "cuda", pd.DataFrame(), [], 4, 0) == []
    note = space_note(problem, "cuda", pd.DataFrame(), [])
    assert note == needs_template(problem, "cuda") and "no cuda seed template" in note
    assert needs_template(load_problem("fp8_mm"), "hip").startswith("problem 'fp8_mm' has no hip seed template")
