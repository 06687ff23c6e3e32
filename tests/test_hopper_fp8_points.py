"""benchmarks/hopper_fp8.py refuses, before any build or GPU work, a point outside the problem's declared space, naming
the reason (on 2026-11-29 a device call built two fp8_gemm points with EPI 2 and the default A_MN 1, which the template's
static_assert refuses, and timed nothing). The script needs torch only from its main's GPU steps on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.benchmark_scripts import load_benchmark

from ksci.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "hopper_fp8.py"

pytest.importorskip("torch")


def _module():
    return load_benchmark("hopper_fp8")


def test_built_in_points_outside_a_problems_space_are_left_out_with_the_reason():
    hopper = _module()
    args = SimpleNamespace(template_dir=None, outside_space=False)
    said = []
    kmajor = hopper.points_of("fp8_gemm_kmajor", None, args, said.append)
    assert len(kmajor) == len(hopper.DEFAULT_POINTS) and said == []
    column_major = hopper.points_of("fp8_gemm", None, args, said.append)
    assert len(column_major) == len(hopper.DEFAULT_POINTS) - 1
    assert said == [
        "[fp8_gemm] built-in point BN=192,STAGES=4,OVERLAP=0 left out: violates A_MN == 0 or (BM == 64 * CONSUMERS "
        "and (OVERLAP == 0 or BN <= 96) and (N_PARTS == 2 or BN <= 144))"
    ]


def test_reasons_name_the_constraint_the_unknown_name_and_the_value():
    hopper = _module()
    template = load_problem("fp8_gemm").template("cuda", "wgmma")
    epi2 = hopper.point_errors(template, hopper.parse_point("EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=96"))
    assert epi2 == [
        "violates EPI < 2 or (OVERLAP == 0 and N_PARTS == 1 and PROMOTE == 4 and SPLIT_K == 1 and A_MN == 0)"
    ]
    assert hopper.point_errors(template, hopper.parse_point("A_MN=0,EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=96")) == []
    assert hopper.point_errors(template, {"FOO": 1}) == ["template 'wgmma' has no parameter(s) FOO"]
    assert hopper.point_errors(template, {"BM": 7}) == ["template 'wgmma': BM=7 is not one of [64, 128, 192, 256]"]
    # --outside-space lets a constraint's violation through (an experiment's template), not what rendering refuses.
    experiment = SimpleNamespace(template_dir=None, outside_space=True)
    epi2_a_mn1 = "EPI=2,OVERLAP=0,SPLIT_K=1"
    assert hopper.points_of("fp8_gemm", [epi2_a_mn1], experiment, print) == [hopper.parse_point(epi2_a_mn1)]
    with pytest.raises(SystemExit, match=r"BM=7 is not one of \[64, 128, 192, 256\]"):
        hopper.points_of("fp8_gemm", ["BM=7"], experiment, print)


def test_the_script_stops_with_the_reasons_before_any_gpu_work(tmp_path):
    command = [sys.executable, str(SCRIPT), "--problems", "fp8_gemm", "--check-only", "--out", str(tmp_path)]
    done = subprocess.run([*command, "--point", "EPI=2,OVERLAP=0,SPLIT_K=1"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "points outside the declared space" in done.stderr and "A_MN == 0" in done.stderr
    bad = subprocess.run([*command, "--point", "BM=x"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and "write K=V pairs with whole numbers" in bad.stderr
