"""`ksci export` (ksci/export/): a package written from a run the test records, built and imported with the
simulator's library stand-in (its op computes with reference.py, on the CPU), the package's own CPU checks run, a
real CUDA library built with nvcc for a candidate's source, and each refusal with its exit code and one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ksci.backends.simulated import SIMULATED_GPU
from ksci.evaluate.toolchain import toolchains as toolchain
from ksci.export.contract import evaluate, held_out_shapes, shape_contract, tensor_specs
from ksci.export.run import export_run
from ksci.export.source import ExportRefused
from ksci.lineage.store import Candidate, LineageStore
from ksci.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = "fp8_gemm_kmajor"
SOURCE = (ROOT / "kernels" / PROBLEM / "solutions" / "correct" / "smem_tiled.cu").read_text()
# A lineage as a GPU run records it; the numbers are this test's own, not a measurement.
GPU = "NVIDIA H100 80GB HBM3 (test fixture)"


def _row(store: LineageStore, run: str, source: str, status: str, **values) -> Candidate:
    path = store.put_source(source, ".cu")
    cid = Path(path).stem
    return Candidate(
        run=run,
        problem=PROBLEM,
        generation=0,
        candidate_id=cid,
        proposer="seed",
        source_path=path,
        target=values.pop("target", "cuda"),
        arch="sm_90a",
        status=status,
        geomean_us=values.pop("geomean_us", 50.0 if status == "ok" else None),
        vendor_geomean_us=48.0 if status == "ok" else None,
        speedup_vs_vendor=48.0 / 50.0 if status == "ok" else None,
        shape_times_json=json.dumps({"1024x1536x7168": 50.0}),
        shape_baselines_json=json.dumps({"1024x1536x7168": {"vendor_us": 48.0, "reference_us": 900.0}}),
        gpu=values.pop("gpu", GPU),
        fingerprint_json=json.dumps(values.pop("fingerprint", {"gpu": GPU, "toolchain": "nvcc 13 (test fixture)"})),
        **values,
    )


@pytest.fixture
def store(tmp_path) -> Path:
    """Run `measured`: the correct solution (ok) and a wrong one (wrong); run `sim`: a simulated ok row; run
    `rocm`: an ok row for ROCm."""
    root = tmp_path / "runs"
    store = LineageStore(root)
    wrong = (ROOT / "kernels" / PROBLEM / "solutions" / "wrong" / "scale_off_by_one.cu").read_text()
    sim = {"gpu": SIMULATED_GPU, "fingerprint": {"gpu": SIMULATED_GPU}}
    store.append(
        [
            _row(store, "measured", SOURCE, "ok"),
            _row(store, "measured", wrong, "wrong"),
            _row(store, "sim", SOURCE + "// sim\n", "ok", **sim),
            _row(store, "rocm", SOURCE + "// rocm\n", "ok", target="rocm"),
        ]
    )
    return root


def test_the_contract_tensors_and_held_out_shapes_come_from_problem_yaml():
    problem = load_problem(PROBLEM)
    assert {d: (r.minimum, r.maximum, r.multiple) for d, r in shape_contract(problem).items()} == {
        "m": (64, 16384, 32),
        "n": (64, 16384, 64),
        "k": (128, 16384, 128),
    }
    specs = {t.name: t for t in tensor_specs(problem, "cuda")}
    assert (specs["a"].dims, specs["a"].order, specs["a"].dtype) == (("m", "k"), "row", "float8_e4m3fn")
    assert specs["b_scale"].order == "column" and specs["c"].dims == ("m", "n")
    assert [evaluate(e, {"m": 64, "n": 576, "k": 7168}) for e in specs["b_scale"].dims] == [5, 56]
    declared = [{k: v for k, v in s.items() if k != "seed"} for s in (*problem.tests, *problem.benchmarks)]
    held_out = held_out_shapes(problem)
    assert len(held_out) == 4 and not [s for s in held_out if s in declared]
    rules = shape_contract(problem)
    assert all(rules[d].problem(v) is None for s in held_out for d, v in s.items())


def _ksci(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ksci.cli", "export", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_the_package_builds_imports_and_passes_its_cpu_checks_with_the_test_stand_in(store, tmp_path):
    folder = export_run(store, "measured", output=tmp_path / "pkg", test_stand_in=True).folder
    package = folder / f"ksci_{PROBLEM}"
    spec = json.loads((package / "spec.json").read_text())
    assert spec["backend"] == "test-stand-in" and spec["libraries"] == {}
    assert spec["contract"]["k"] == {"name": "k", "minimum": 128, "maximum": 16384, "multiple": 128}
    assert (package / "kernel.cu").read_text() == SOURCE and (package / "reference.py").is_file()
    readme = (folder / "README.md").read_text()
    assert "TEST STAND-IN, NOT A KERNEL" in readme and GPU in readme
    assert "1.04x slower" in readme and "| 1024x1536x7168 | 50.0 | 48.0 | 0.96 |" in readme
    wheel = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(tmp_path / "w"),
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wheel.returncode == 0, wheel.stdout + wheel.stderr
    built = list((tmp_path / "w").glob("*.whl"))
    assert len(built) == 1 and built[0].name.startswith("ksci_fp8_gemm_kmajor-0.1.0+")
    # The package's own tests that need no GPU: refusals, fake implementation, one declared shape on the stand-in.
    checks = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(folder / "tests"),
            "-k",
            "outside_the_contract or wrong_dtype or fake or spec-64x64x128",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(folder)},
    )
    assert checks.returncode == 0, checks.stdout[-3000:] + checks.stderr[-2000:]
    assert "6 passed" in checks.stdout, checks.stdout[-2000:]


def test_the_op_computes_with_the_stand_in_and_refuses_a_shape_outside_the_contract(store, tmp_path):
    folder = export_run(store, "measured", output=tmp_path / "pkg", test_stand_in=True).folder
    code = f"""
import torch, ksci_{PROBLEM} as pkg
from ksci_{PROBLEM} import reference
x = reference.generate_input({{"m": 64, "n": 128, "k": 256}}, 1, "cuda", "cpu")
out = torch.ops.ksci_{PROBLEM}.{PROBLEM}(x["a"], x["b"], x["a_scale"], x["b_scale"])
assert torch.equal(out, reference.reference(x)["c"])
y = reference.generate_input({{"m": 40, "n": 128, "k": 256}}, 1, "cuda", "cpu")
try:
    torch.ops.ksci_{PROBLEM}.{PROBLEM}(y["a"], y["b"], y["a_scale"], y["b_scale"])
except ValueError as exc:
    print(exc)
"""
    out = _python_with_package(folder, code)
    assert out.stdout.strip() == (
        f"ksci_{PROBLEM}::{PROBLEM}: m=40 is outside the shape contract (m a multiple of 32 from 64 to 16384; pad or "
        "split the input)"
    )


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--run", "nope"], 2, "no run 'nope'"),
        (["--run", "sim"], 2, "run 'sim' is simulated"),
        (["--run", "measured", "--candidate", "WRONG"], 2, "is wrong, not ok"),
        (["--run", "measured", "--candidate", "ffff"], 2, "has no candidate 'ffff'"),
    ],
)
def test_refusals_are_one_line_with_their_exit_code(store, tmp_path, args, code, words):
    if "WRONG" in args:
        frame = LineageStore(store).read("measured")
        args = [a if a != "WRONG" else frame[frame["status"] == "wrong"].iloc[0]["candidate_id"] for a in args]
    out = _ksci(*args, "--store", str(store), "-o", str(tmp_path / "out"))
    assert out.returncode == code, out.stderr
    assert out.stderr.count("\n") == 1 and words in out.stderr and out.stdout == ""
    assert not (tmp_path / "out").exists()


def test_a_target_without_its_compiler_is_refused_naming_it(store, tmp_path, monkeypatch):
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("unshare", "gcc"):
        if found := shutil.which(tool):
            (bare / tool).symlink_to(found)
    out = _ksci("--run", "rocm", "--store", str(store), "-o", str(tmp_path / "out"), env={"PATH": str(bare)})
    assert out.returncode == 3, out.stderr
    assert out.stderr.count("\n") == 1 and "hipcc not found" in out.stderr and "cannot build for rocm" in out.stderr
    # nvcc is also looked for in /usr/local/cuda/bin, whatever PATH says: the search path itself is narrowed here.
    monkeypatch.setattr(toolchain, "_search_path", lambda target: str(bare))
    with pytest.raises(ExportRefused, match="cannot build for cuda sm_90a: nvcc not found") as refused:
        export_run(store, "measured", output=tmp_path / "out")
    assert refused.value.code == 3 and not (tmp_path / "out").exists()


def test_an_existing_output_folder_is_refused(store, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ExportRefused, match="exists and is not an empty folder") as refused:
        export_run(store, "measured", output=tmp_path / "out", test_stand_in=True)
    assert refused.value.code == 2 and (tmp_path / "out" / "keep.txt").read_text() == "mine"


@pytest.mark.nvcc
def test_a_real_cuda_candidate_is_built_into_a_library_that_exports_its_entry(store, tmp_path):
    out = _ksci("--run", "measured", "--store", str(store), "-o", str(tmp_path / "pkg"))
    assert out.returncode == 0, out.stderr
    library = tmp_path / "pkg" / f"ksci_{PROBLEM}" / "lib" / "kernel_sm_90a.so"
    assert library.is_file()
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    assert any(line.split()[-1] == PROBLEM for line in symbols.splitlines())
    spec = json.loads((tmp_path / "pkg" / f"ksci_{PROBLEM}" / "spec.json").read_text())
    assert spec["backend"] == "kernel" and spec["libraries"] == {"sm_90a": "lib/kernel_sm_90a.so"}
    assert "-gencode=arch=compute_90a,code=sm_90a" in (tmp_path / "pkg" / "README.md").read_text()


def test_the_package_names_a_cuda_gpu_by_its_compute_capability(store, tmp_path):
    """torch's CUDA device properties also carry `gcnArchName` (the device's name, 'NVIDIA H100 80GB HBM3'): the
    package must pick its library by sm_XY there and by gcnArchName on ROCm only."""
    folder = export_run(store, "measured", output=tmp_path / "pkg", test_stand_in=True).folder
    code = f"""
import types, torch
from ksci_{PROBLEM} import _runtime
props = types.SimpleNamespace(major=9, minor=0, gcnArchName="NVIDIA H100 80GB HBM3")
torch.cuda.get_device_properties = lambda device: props
torch.version.hip = None
print(_runtime.device_arch("cuda"))
props.gcnArchName = "gfx942:sramecc+:xnack-"
torch.version.hip = "6.2"
print(_runtime.device_arch("cuda"))
"""
    out = _python_with_package(folder, code)
    assert out.stdout.split() == ["sm_90", "gfx942"]


def _python_with_package(folder: Path, code: str) -> subprocess.CompletedProcess:
    """`code` run by a new Python with the exported package importable from `folder`; it must exit 0."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(folder)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out
