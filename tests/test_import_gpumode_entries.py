"""`ksci import gpumode` on three more constructs of gpu-mode's reference-kernels, each a small task written for
these tests (tests/data/gpumode/cases/): an input whose dtype differs between cases (bioml trimul's mask), a size-1
output buffer for a 0-dim output (pmpp_v2 vectorsum) and two entry points timed together (princeton
cross_entropy's forward and backward)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from ksci.importers.common import ImportFailure, Unmappable
from ksci.importers.gpumode import import_gpumode
from ksci.importers.gpumode_entries import fixed_arguments
from ksci.importers.runtime import execute
from ksci.problem.spec import load_problem

CASES = Path(__file__).parent / "data" / "gpumode" / "cases"


@pytest.fixture(scope="module")
def dest(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("entries")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KSCI_KERNELS_DIR", str(dest))
        for name in ("mask_dtype", "scalar_buffer", "two_entries"):
            result = import_gpumode(CASES / name, dest=dest)
            assert not isinstance(result, ImportFailure), f"{name}: {result}"
        yield dest


def _run(dest: Path, monkeypatch, name: str, shape: dict) -> tuple:
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(dest))
    problem = load_problem(name)
    ref = problem.reference_module()
    tensors = ref.generate_input(shape, shape["seed"], "cuda", "cpu")
    inputs = {k: v for k, v in tensors.items() if k not in problem.outputs}
    return problem, tensors, ref.reference(inputs)


def test_an_input_whose_dtype_differs_between_cases_is_cast_to_one_dtype(dest, monkeypatch):
    spec = yaml.safe_load((dest / "mask_dtype" / "problem.yaml").read_text())
    assert spec["imported"]["casts"] == {"mask": "float32"}
    assert spec["dtypes"]["cuda"]["mask"] == "float32"
    for shape in spec["tests"]:  # nomask (float32 ones) and a 0/1 int64 draw: both handed as float32
        _, tensors, expected = _run(dest, monkeypatch, "mask_dtype", shape)
        assert tensors["mask"].dtype == torch.float32
        assert torch.equal(expected["out"], tensors["x"] * tensors["mask"].unsqueeze(-1))
    _, drawn, _ = _run(dest, monkeypatch, "mask_dtype", spec["tests"][1])
    assert set(drawn["mask"].unique().tolist()) <= {0.0, 1.0} and drawn["mask"].sum() < drawn["mask"].numel()


def test_a_cast_that_changes_the_reference_is_refused(tmp_path):
    task = tmp_path / "tasks" / "mask_dtype"
    task.mkdir(parents=True)
    (tmp_path / "tasks" / "utils.py").write_text((CASES / "utils.py").read_text())
    (task / "task.yml").write_text((CASES / "mask_dtype" / "task.yml").read_text())
    source = (CASES / "mask_dtype" / "reference.py").read_text()
    reads_dtype = "return x * mask.unsqueeze(-1) + (0.0 if mask.is_floating_point() else 1.0)"
    (task / "reference.py").write_text(source.replace("return x * mask.unsqueeze(-1)", reads_dtype))
    result = import_gpumode(task, dest=tmp_path / "dest")
    assert isinstance(result, ImportFailure) and result.construct == "tensors vary with the shape", result
    assert "mask is int64" in result.message and "ref_kernel's outputs change" in result.message, result


def test_a_size_one_buffer_for_a_zero_dim_output_is_the_output_in_the_buffers_dims(dest, monkeypatch):
    spec = yaml.safe_load((dest / "scalar_buffer" / "problem.yaml").read_text())
    assert spec["entry_point"]["outputs"] == ["output"]
    assert spec["imported"]["outputs"]["output"] == {
        "from": "buffer",
        "data": "output",
        "scalar": True,
        "dtype": "float32",
    }
    _, tensors, expected = _run(dest, monkeypatch, "scalar_buffer", spec["tests"][0])
    assert expected["output"].shape == (1,) == tensors["output"].shape
    assert torch.allclose(expected["output"], tensors["data"].double().sum().float().reshape(1))


def test_two_entry_points_are_one_kernel_with_the_batch_size_that_eval_fixes(dest, monkeypatch):
    spec = yaml.safe_load((dest / "two_entries" / "problem.yaml").read_text())
    assert spec["entry_point"]["outputs"] == ["forward", "backward"]
    assert spec["tests"][0] == {"batch_size": 6, "vocab_size": 64, "seed": 4242}
    assert (spec["tolerance"]["rtol"], spec["tolerance"]["atol"]) == (1e-2, 1e-3)
    assert "reference_forward, reference_backward" in spec["description"]
    _, tensors, expected = _run(dest, monkeypatch, "two_entries", spec["tests"][0])
    logits, targets, grad = tensors["logits"], tensors["targets"], tensors["grad_output"]
    assert logits.dtype == torch.bfloat16 and logits.shape == (6, 64) and targets.dtype == torch.int64
    assert torch.allclose(expected["forward"], F.cross_entropy(logits.float(), targets, reduction="none"))
    manual = torch.softmax(logits.float(), -1) - F.one_hot(targets, 64)
    assert torch.allclose(expected["backward"].float(), manual * grad[:, None], atol=1e-2)


def test_an_argument_that_neither_the_shapes_nor_eval_fix_is_refused_in_one_line():
    def generate_inputs(batch_size, vocab_size, seed=42):
        return ()

    assert fixed_arguments(generate_inputs, "B = 6\nx = generate_inputs(B, vocab_size)\n", {"vocab_size"}) == {
        "batch_size": 6
    }
    with pytest.raises(Unmappable, match="batch_size, which neither"):
        fixed_arguments(generate_inputs, "x = generate_inputs(n, vocab_size)\n", {"vocab_size"})


def test_a_source_picking_its_device_by_cuda_availability_follows_the_draws_device():
    source = (
        "import torch\n"
        "def pick():\n"
        "    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "    return torch.randn(2, device=device, generator=torch.Generator(device=device)).device.type\n"
    )
    ns = execute(source, "pick.py")
    ns["_KSCI_DEVICE"] = "meta"  # the importer's dry run: set after the source ran, seen by its rewritten calls
    assert ns["pick"]() == "meta"
    ns["_KSCI_DEVICE"] = "cpu"
    assert ns["pick"]() == "cpu"


def test_a_module_level_device_constant_points_at_each_draws_device():
    from ksci.importers.gpumode_runtime import draw, load_task

    task = CASES / "two_entries"
    ns = load_task(task / "reference.py", None, CASES / "utils.py")
    assert ns["_ksci_device_names"] == ["DEVICE"]
    logits, targets, grad = draw(ns, {"batch_size": 6, "vocab_size": 64, "seed": 1}, {}, "meta")
    assert logits.device.type == targets.device.type == grad.device.type == "meta"  # DEVICE = "cuda" at load
    assert draw(ns, {"batch_size": 6, "vocab_size": 64, "seed": 1}, {}, "cpu")[0].device.type == "cpu"
