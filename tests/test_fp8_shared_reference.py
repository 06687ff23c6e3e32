"""fp8_gemm and fp8_gemm_kmajor bind one shared module (ksci/problem/fp8_block_scaled.py): the same values in each
problem's layouts, the module in what the LLM reads, and beside reference.py in an exported package that needs no
ksci to import it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from ksci.export.package import copy_reference
from ksci.problem.spec import load_problem

SHAPE = {"m": 96, "n": 576, "k": 384}
PROFILES = ("spec", "full_range", "outliers", "zeros")


@pytest.mark.parametrize("profile", PROFILES)
def test_both_layouts_hold_the_same_values_for_a_seed(profile):
    column = load_problem("fp8_gemm").reference_module().generate_input(SHAPE, 11, "cuda", "cpu", profile)
    k_major = load_problem("fp8_gemm_kmajor").reference_module().generate_input(SHAPE, 11, "cuda", "cpu", profile)
    assert column["a"].stride() == (1, 96) and column["b"].stride() == (1, 576)
    assert k_major["a"].is_contiguous() and k_major["b"].is_contiguous()
    for name in ("a", "b", "a_scale", "b_scale"):
        assert torch.equal(column[name].float(), k_major[name].float()), name
        assert column[name].dtype == k_major[name].dtype == (torch.float32 if "scale" in name else torch.float8_e4m3fn)
    assert column["a_scale"].stride() == k_major["a_scale"].stride() == (1, 96)


def test_the_llm_reads_the_shared_module_after_each_reference():
    for name in ("fp8_gemm", "fp8_gemm_kmajor"):
        text = load_problem(name).reference_text()
        head, _, shared = text.partition("\n\n# ---- ksci/problem/fp8_block_scaled.py ----\n")
        assert "from ksci.problem import fp8_block_scaled as fp8" in head
        assert "def reference(inputs: dict) -> dict:" in shared and "def _quantise(" in shared
    assert "# ----" not in load_problem("rmsnorm").reference_text()  # a reference that imports no shared module


def test_an_exported_reference_carries_the_shared_module_and_imports_without_ksci(tmp_path):
    package = tmp_path / "ksci_fp8_gemm_kmajor"
    package.mkdir()
    (package / "__init__.py").write_text("")
    copy_reference(load_problem("fp8_gemm_kmajor"), package)
    assert (package / "fp8_block_scaled.py").is_file()
    code = (
        "import sys, json; sys.modules['ksci'] = None\n"  # any import of ksci fails
        "from ksci_fp8_gemm_kmajor import reference as r\n"
        f"t = r.generate_input({SHAPE!r}, 11, 'cuda', 'cpu', 'outliers')\n"
        "print(json.dumps([float(r.reference(t)['c'].float().abs().sum()), r.flops({'m': 2, 'n': 3, 'k': 4})]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ref = load_problem("fp8_gemm_kmajor").reference_module()
    expected = float(ref.reference(ref.generate_input(SHAPE, 11, "cuda", "cpu", "outliers"))["c"].float().abs().sum())
    assert json.loads(done.stdout) == [expected, 48.0]
