"""The importers' limits on the importing machine's work, each on a small source written for these tests
(tests/data/gpumode/cases, tests/data/kernelbench/cases): a gpu-mode task checked by a property of its output (its
own check_implementation is the verdict), a benchmark shape too slow to probe (deferred: measured where the problem
runs), a KernelBench semantic check that is too slow here (recorded as not run), a model whose __init__ reads values,
and a negative module constant (no shape key)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml

from ksci.importers import gpumode_dryrun, kernelbench
from ksci.importers.common import ImportFailure
from ksci.importers.gpumode import import_gpumode
from ksci.importers.gpumode_runtime import GpuModeReference
from ksci.importers.kernelbench import import_kernelbench

DATA = Path(__file__).parent / "data"
GPUMODE = DATA / "gpumode" / "cases"
KERNELBENCH = DATA / "kernelbench" / "cases"


def _imported(result) -> dict:
    assert not isinstance(result, ImportFailure), result
    return yaml.safe_load((result.root / "problem.yaml").read_text())


def _first(ref: GpuModeReference, spec: dict, role: str = "tests") -> tuple[dict, dict]:
    shape = {k: v for k, v in spec[role][0].items() if k != "seed"}
    tensors = ref.generate_input(shape, spec[role][0]["seed"], list(spec["dtypes"])[0], "cpu")
    return shape, tensors


def test_a_property_check_is_the_verdict_it_accepts_the_reference_and_rejects_a_wrong_output(tmp_path):
    spec = _imported(import_gpumode(GPUMODE / "property_check", dest=tmp_path))
    assert spec["imported"]["check"] == "task"
    ref = GpuModeReference(tmp_path / "property_check")
    _shape, tensors = _first(ref, spec)
    inputs = {k: v for k, v in tensors.items() if k not in ref.outputs}
    expected = ref.reference(inputs)
    assert ref.verdict(inputs, expected) == (True, ref.verdict(inputs, expected)[1])
    ok, message = ref.verdict(inputs, {name: out.transpose(0, 1) for name, out in expected.items()})
    assert not ok and message.startswith("residual"), message


def test_a_check_that_rejects_its_own_reference_is_refused_in_one_line(tmp_path):
    result = import_gpumode(DATA / "gpumode" / "errors" / "check_rejects", dest=tmp_path)
    assert isinstance(result, ImportFailure) and result.construct == "the task's check rejects its reference"
    assert "every element must be negative" in str(result) and "\n" not in str(result)


def test_a_shape_too_slow_to_probe_is_deferred_and_measured_where_the_problem_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(gpumode_dryrun, "SHAPE_LIMIT_S", 1.0)  # the 3000 draw sleeps 3 s
    tasks = tmp_path / "tasks"
    shutil.copytree(GPUMODE / "slow_benchmark", tasks / "slow_benchmark")
    shutil.copy(GPUMODE / "utils.py", tasks / "utils.py")
    spec = _imported(import_gpumode(tasks / "slow_benchmark", dest=tmp_path / "dest"))
    rows = {row["shape"]["size"]: row for row in spec["imported"]["shapes"]}
    assert rows[3000]["deferred"].startswith("not probed") and rows[3000]["flops"] is None
    assert "deferred" not in rows[128] and rows[128]["inputs"] == {"data": [128]}
    ref = GpuModeReference(tmp_path / "dest" / "slow_benchmark")
    tensors = ref.generate_input({"size": 3000}, 3, list(spec["dtypes"])[0], "cpu")
    assert tensors["out"].shape == (3000,) and ref.row({"size": 3000})["inputs"] == {"data": [3000]}
    assert ref.bytes_moved({"size": 3000}) == 2 * 3000 * 4
    out = ref.reference({"data": tensors["data"]})["out"]
    assert torch.allclose(out, torch.cumsum(tensors["data"], 0))


def test_kernelbench_semantics_run_at_a_shape_cheap_here_or_are_recorded_as_not_run(tmp_path, monkeypatch):
    spec = _imported(import_kernelbench(KERNELBENCH / "slow_forward.py", dest=tmp_path))
    assert spec["imported"]["semantics_checked"].startswith("on cpu at {'batch': 9")  # the test shape
    monkeypatch.setattr(kernelbench, "PROBE_ELEMENTS", 0)  # no shape is cheap: the test shape under a limit
    monkeypatch.setattr(kernelbench, "PROBE_LIMIT_S", 0.1)  # shorter than one forward
    spec = _imported(import_kernelbench(KERNELBENCH / "slow_forward.py", "slow2", dest=tmp_path))
    assert spec["imported"]["semantics_checked"].startswith("not run: no shape costs under")


def test_kernelbench_a_model_whose_init_reads_values_and_a_negative_constant(tmp_path):
    spec = _imported(import_kernelbench(KERNELBENCH / "init_reads_values.py", dest=tmp_path))
    assert spec["benchmarks"][0] == {"batch": 16, "features": 64, "layers": 3, "seed": 1001}
    spec = _imported(import_kernelbench(KERNELBENCH / "negative_clamp.py", dest=tmp_path))
    assert "clamp_min" not in spec["benchmarks"][0] and spec["benchmarks"][0]["clamp_max"] == 1
    assert spec["imported"]["semantics_checked"].startswith("on cpu at")


@pytest.mark.parametrize("seconds", [0.2])
def test_nested_time_limits_raise_the_inner_one_and_keep_the_outer(seconds):
    import time

    from ksci.importers.limits import time_limit

    class Inner(BaseException):
        pass

    class Outer(BaseException):
        pass

    with pytest.raises(Outer):
        with time_limit(seconds * 3, Outer):
            with pytest.raises(Inner):
                with time_limit(seconds, Inner):
                    time.sleep(seconds * 10)
            time.sleep(seconds * 10)


def test_checks_whose_reference_counts_over_check_flops_on_meta_run_at_a_reduced_shape(tmp_path, monkeypatch):
    monkeypatch.setattr(gpumode_dryrun, "CHECK_FLOPS", 1000.0)  # the smallest test's x @ w counts 2 * 16 * 32 * 32
    spec = _imported(import_gpumode(GPUMODE / "case_params", dest=tmp_path))
    assert spec["imported"]["checks_at"] == {"n": 2, "k": 4, "has_bias": 1, "activation": 0}  # 16 and 32 over 8
    assert spec["tests"][0] == {"n": 16, "k": 32, "seed": 1, "has_bias": 1, "activation": 0}  # the task's shapes kept
