"""The `ksci` command line as scripts use it: exit codes, one-line errors, JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ksci import cli
from ksci.evaluate.run.visibility import gpu_visible

ROOT = Path(__file__).resolve().parent.parent
FAKES = Path(__file__).resolve().parent / "fakes"


def ksci(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ksci.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def test_problems_lists_the_shipped_problems():
    out = ksci("problems", "--json")
    assert out.returncode == 0
    names = {p["name"]: p for p in json.loads(out.stdout)}
    assert names["fp8_gemm"]["tests"] == 11 and names["fp8_gemm"]["benchmarks"] == 18
    assert "naive" in names["fp8_gemm"]["templates"]["hip"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "--problem", "nope", "--source", "x.cu"], "unknown problem 'nope'"),
        (["evaluate", "--problem", "fp8_gemm", "--source", "missing.cu"], "no such file: missing.cu"),
        (["render", "--problem", "fp8_gemm", "--template", "naive", "--param", "BLOCK_X=7"], "is not one of"),
        (["render", "--problem", "fp8_gemm", "--template", "nope"], "has no cuda template 'nope'"),
        (["evolve", "--problem", "fp8_gemm", "--simulate", "", "--overlap", "-1"], "--overlap must be 0 or more"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    out = ksci(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and message in out.stderr


def test_a_source_without_the_entry_point_is_rejected(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('extern "C" int something_else(void* s) { return 0; }\n')
    out = ksci("evaluate", "--problem", "fp8_gemm", "--source", str(src))
    assert out.returncode == 2 and 'does not define the entry point extern "C" fp8_gemm' in out.stderr


@pytest.mark.nvcc
def test_compile_only_json_holds_status_and_resources(tmp_path):
    src = tmp_path / "naive.cu"
    assert ksci("render", "--problem", "fp8_gemm", "--template", "naive", "-o", str(src)).returncode == 0
    out = ksci(
        "evaluate", "--problem", "fp8_gemm", "--source", str(src), "--compile-only", "--json", "--arch", "sm_90a"
    )
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)
    assert verdict["status"] == "compiled" and verdict["compile"]["ok"]
    assert verdict["compile"]["resources"][0]["registers"] > 0
    assert verdict["fingerprint"]["toolchain"].startswith("Cuda compilation tools")


@pytest.mark.nvcc
def test_compile_error_verdict(tmp_path):
    src = ROOT / "kernels/fp8_gemm/solutions/wrong/syntax_error.cu"
    out = ksci("evaluate", "--problem", "fp8_gemm", "--source", str(src), "--compile-only", "--json")
    assert out.returncode == 1
    verdict = json.loads(out.stdout)
    assert verdict["status"] == "compile_error" and "error" in verdict["message"]


@pytest.mark.nvcc
@pytest.mark.skipif(gpu_visible("cuda"), reason="checks the message given where there is no GPU")
def test_without_a_gpu_evaluate_says_so(tmp_path):
    src = tmp_path / "naive.cu"
    ksci("render", "--problem", "fp8_gemm", "--template", "naive", "-o", str(src))
    out = ksci("evaluate", "--problem", "fp8_gemm", "--source", str(src))
    assert out.returncode == 3 and "no cuda GPU is visible" in out.stderr


@pytest.mark.hip_gfx942
def test_port_falls_back_to_hipify_perl_and_reports_leftovers(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(
        "#include <cuda_runtime.h>\n__global__ void k() {}\n"
        'extern "C" int run(void* s) { cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);\n'
        "  k<<<1, 1, 0, (cudaStream_t)s>>>(); return (int)cudaGetLastError(); }\n"
    )
    env = dict(os.environ, PATH=f"{FAKES}{os.pathsep}{os.environ['PATH']}", KSCI_COMPILE_CACHE=str(tmp_path / "cc"))
    out = ksci("port", str(src), env=env)
    # The stand-in leaves cudaFuncSetAttribute, which no HIP header declares: written, named, and not a success.
    assert out.returncode == 1 and out.stdout == ""
    assert "converted with hipify-perl" in out.stderr  # hipify-clang failed first
    converted = (tmp_path / "k.hip").read_text()
    assert "#include <hip/hip_runtime.h>" in converted and "hipStream_t" in converted
    assert "left unconverted: cudaFuncAttributeMaxDynamicSharedMemorySize, cudaFuncSetAttribute" in out.stderr
    assert "does not compile for gfx942" in out.stderr and f"{tmp_path / 'k.hip'}:3:" in out.stderr


@pytest.mark.hip_gfx942
def test_port_without_hipify_tools_uses_torchs_converter(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(
        "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
        'extern "C" int run(float* x, void* s) { k<<<1, 32, 0, (cudaStream_t)s>>>(x); return (int)cudaGetLastError(); }\n'
    )
    env = dict(os.environ, PATH="/usr/bin:/bin", KSCI_COMPILE_CACHE=str(tmp_path / "cc"))
    out = subprocess.run(
        ["/bin/sh", "-c", f"{sys.executable} -m ksci.cli port {src}"], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr
    assert "converted with torch.utils.hipify; compiles for gfx942" in out.stdout
    converted = (tmp_path / "k.hip").read_text()
    assert "hipStream_t" in converted and "hipGetLastError" in converted and "cuda" not in converted.replace("hip", "")


def test_port_without_any_converter_is_an_environment_error(tmp_path, monkeypatch, capsys):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("ksci.evaluate.toolchain.hipify._torch_available", lambda: False)
    assert cli.main(["port", str(src)]) == 3
    assert "no CUDA-to-HIP converter" in capsys.readouterr().err


def test_port_of_inline_ptx_fails_with_the_construct_named(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('__global__ void k() {\n  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n}\n')
    out = ksci("port", str(src))
    assert out.returncode == 1 and "inline PTX wgmma (line 2) has no HIP equivalent" in out.stderr
    assert not (tmp_path / "k.hip").exists()


@pytest.mark.skipif(gpu_visible("cuda"), reason="checks the message given where there is no GPU")
def test_without_a_gpu_evolve_says_so_and_does_not_start():
    out = ksci("evolve", "--problem", "fp8_gemm", "--generations", "1")
    assert out.returncode == 3 and "no cuda GPU is visible" in out.stderr and "--simulate" in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize(("flag", "value"), [("--max-candidates", "0"), ("--time-limit", "-1")])
def test_evolve_refuses_a_nonsense_limit_before_starting(flag, value, capsys):
    assert cli.main(["evolve", "--problem", "fp8_gemm", "--simulate", flag, value]) == 2
    assert f"{flag} must be at least" in capsys.readouterr().err


# A bad argument: one line naming the command whose --help lists its options, rc 2, nothing on stdout.
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["evolve", "--problem", "fp8_gemm", "--generatoins", "2"], "ksci evolve: error: unrecognized arguments: "
         "--generatoins 2 (see ksci evolve --help)"),
        (["evolve", "--problem", "fp8_gemm", "--generation", "2"], "ksci evolve: error: unrecognized arguments: "
         "--generation 2"),  # no abbreviation: not read as --generations
        (["evolve", "--generations", "2"], "ksci evolve: error: the following arguments are required: --problem"),
        (["evolve", "--problem", "fp8_gemm", "--generations", "two"], "argument --generations: invalid int value"),
        (["status"], "ksci status: error: the following arguments are required: --run (see ksci status --help)"),
        (["evolv"], "ksci: error: argument command: invalid choice: 'evolv'"),
        (["--generatoins", "2"], "ksci: error:"),
    ],
)  # fmt: skip
def test_a_bad_argument_is_one_line_without_the_usage(argv, said, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "" and err.count("\n") == 1 and said in err, err
    assert "usage:" not in err


def test_help_still_prints_the_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["evolve", "--help"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("usage: ksci evolve")


@pytest.mark.parametrize("command", [["runs"], ["status", "--run", "r"], ["report", "--run", "r"]])
def test_a_store_that_is_not_there_is_refused_naming_it(command, tmp_path, capsys):
    missing = str(tmp_path / "missing")
    assert cli.main([*command, "--store", missing]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"ksci: error: no store at {missing}: the folder does not exist\n"
    assert not (tmp_path / "missing").exists()


def test_a_run_stopped_before_its_first_candidate_is_known_to_status(tmp_path, capsys):
    """What a Ctrl-C before generation 0 recorded anything leaves: the run's identity (written before the flow
    starts, cli._check_evolve) and no lineage. `ksci status` names the run and how to continue it, rc 0, as the
    stop's line promised; `ksci report` refuses it in one line, saying the same."""
    store = str(tmp_path / "store")
    args = cli.build_parser().parse_args(["evolve", "--problem", "fp8_gemm", "--simulate", "--run", "early",
                                          "--store", store])  # fmt: skip
    cli._check_evolve(args)
    assert cli.main(["status", "--run", "early", "--store", store]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("run early (fp8_gemm on cuda, tuning proposer, elitist, simulated (made-up)): no candidate")
    assert out.strip().endswith("continue it with ksci evolve --run early") and err == ""
    assert cli.main(["report", "--run", "early", "--store", store]) == 2
    assert "no candidate recorded yet" in capsys.readouterr().err
    assert cli.main(["status", "--run", "other", "--store", store]) == 2
    assert "no run 'other' in" in capsys.readouterr().err


@pytest.mark.skipif(gpu_visible("cuda"), reason="checks the message given where there is no GPU")
def test_without_a_gpu_make_evolve_names_its_own_simulate_switch():
    """`make evolve` sets KSCI_VIA_MAKE=1 (checked in the Makefile's recipe); ksci's refusal then names SIMULATE=1."""
    recipe = (ROOT / "Makefile").read_text().split("\nevolve: setup\n", 1)[1].splitlines()[0]
    assert recipe.strip().startswith("KSCI_VIA_MAKE=1 $(BIN)/ksci evolve ")
    out = ksci("evolve", "--problem", "fp8_gemm", "--generations", "1", env={**os.environ, "KSCI_VIA_MAKE": "1"})
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and out.stdout == ""
    assert "SIMULATE=1, for trying the loop out" in out.stderr and "--simulate" not in out.stderr
