"""`ksci port` says what it did: exit 0 only when the HIP it wrote compiles for the target, with the toolchain the
evaluation uses (find_toolchain + compile_source); otherwise exit 1 and a line naming what was left unconverted or
the compiler's first error, without terminal codes.

The cases are the shipped fp8_gemm and rmsnorm CUDA solutions that issue 27 tried, through the converter that
Debian machines and CI have (torch's: Debian ships neither hipify-clang nor hipify-perl), compiled with Debian's
clang-19 (HIP 5.2's headers) for gfx942. Each outcome is also checked against a compile of the written file made
here, in another cache, so that exit 0 and exit 1 are the truth about that file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ksci import cli
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.hipify import plain_text
from ksci.evaluate.toolchain.toolchains import ToolchainMissing, find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "kernels"


def port(src: Path, out: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KSCI_COMPILE_CACHE=str(tmp_path / "port-cache"))
    argv = [sys.executable, "-m", "ksci.cli", "port", str(src), "-o", str(out), *extra]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def compiles(path: Path, arch: str, cache: Path) -> bool:
    """Whether the file builds with the evaluation's toolchain, compiled here (not through ksci port)."""
    return compile_source(path.read_text(), find_toolchain("rocm", arch), arch, cache).ok


def test_fp8_types_torchs_converter_cannot_map_fail_naming_them(tmp_path):
    out = port(SOLUTIONS / "fp8_gemm/solutions/correct/smem_tiled.cu", tmp_path / "smem_tiled.hip", tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr  # one line, not the converter's chatter
    assert "(nothing written)" in out.stderr and "__nv_fp8_e4m3" in out.stderr and "cuda_fp8.h" in out.stderr
    assert "\x1b" not in out.stderr  # torch's converter prints in colour
    assert not (tmp_path / "smem_tiled.hip").exists()


def test_inline_ptx_is_refused_naming_the_instruction_and_line(tmp_path):
    src = SOLUTIONS / "fp8_gemm/solutions/correct/mma_tuned.cu"
    line = next(i for i, text in enumerate(src.read_text().splitlines(), 1) if "asm" in text)
    out = port(src, tmp_path / "mma_tuned.hip", tmp_path)
    assert out.returncode == 1 and out.stdout == "" and out.stderr.count("\n") == 1
    assert f"inline PTX mma.sync (line {line}) has no HIP equivalent" in out.stderr
    assert not (tmp_path / "mma_tuned.hip").exists()


@pytest.mark.hip_gfx942
def test_a_warp_function_left_unconverted_that_does_not_compile_fails(tmp_path):
    """warp_per_row.cu converts with __shfl_xor_sync left as it was; HIP 5.2 has no such function (6.2 added it)."""
    written = tmp_path / "warp_per_row.hip"
    out = port(SOLUTIONS / "rmsnorm/solutions/correct/warp_per_row.cu", written, tmp_path)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    first, error = out.stderr.splitlines()
    assert f"wrote {written}" in first and "left unconverted: __shfl_xor_sync" in first
    assert "does not compile for gfx942" in first
    # The compiler's first error, pointing at the written file's line, not at the compile cache.
    assert error.startswith(f"  {written}:") and "__shfl_xor_sync" in error and "port-cache" not in error
    assert not compiles(written, "gfx942", tmp_path / "check-cache")


@pytest.mark.hip_gfx942
def test_a_converted_source_whose_header_hip_lacks_fails(tmp_path):
    """nan_output.cu converts with nothing left over, but hip/hip_bf16.h came with ROCm 5.7: the compile says so."""
    written = tmp_path / "nan_output.hip"
    out = port(SOLUTIONS / "fp8_gemm/solutions/wrong/nan_output.cu", written, tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    first, error = out.stderr.splitlines()
    assert "left unconverted" not in first and "does not compile for gfx942" in first
    assert error.startswith(f"  {written}:") and "hip/hip_bf16.h" in error
    assert not compiles(written, "gfx942", tmp_path / "check-cache")


@pytest.mark.parametrize(
    "arch", [pytest.param("gfx942", marks=pytest.mark.hip_gfx942), pytest.param("gfx940", marks=pytest.mark.hipcc)]
)
def test_output_that_compiles_exits_0_and_says_for_what(tmp_path, arch):
    src = tmp_path / "rmsnorm_naive.cu"
    src.write_text(render_kernel(load_problem("rmsnorm").template("cuda", "naive"), {}))
    written = tmp_path / "rmsnorm_naive.hip"
    out = port(src, written, tmp_path, "--arch", arch)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"wrote {written} (converted with ") and f"compiles for {arch}: " in out.stdout
    assert "\x1b" not in out.stdout + out.stderr
    assert compiles(written, arch, tmp_path / "check-cache")


def test_without_a_hip_compiler_it_writes_the_file_and_exits_3(tmp_path, monkeypatch, capsys):
    src = tmp_path / "k.cu"
    src.write_text(
        "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
        'extern "C" int run(float* x, void* s) { k<<<1, 32, 0, (cudaStream_t)s>>>(x); return (int)cudaGetLastError(); }\n'
    )

    def no_compiler(target, arch=None):
        raise ToolchainMissing("hipcc not found")

    monkeypatch.setattr("ksci.commands.find_toolchain", no_compiler)
    assert cli.main(["port", str(src), "--arch", "gfx942"]) == 3  # not 0: nothing says that it compiles
    err = capsys.readouterr().err
    assert f"wrote {tmp_path / 'k.hip'}" in err and "cannot compile it: hipcc not found" in err
    assert "hipStream_t" in (tmp_path / "k.hip").read_text()


def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, capsys):
    src = tmp_path / "k.cu"
    src.write_text("#include <cuda_runtime.h>\n__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    assert cli.main(["port", str(src), "-o", str(tmp_path / "no-such-folder" / "k.hip")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write {tmp_path / 'no-such-folder' / 'k.hip'}" in err


def test_terminal_codes_are_taken_out_of_converter_output():
    coloured = "kernel0.cu: [ok]\n\x1b[92mSuccessfully preprocessed all matching files.\x1b[0m\n"
    assert plain_text(coloured) == "kernel0.cu: [ok]\nSuccessfully preprocessed all matching files.\n"
    assert plain_text("tabs\tand\r\nlines stay") == "tabs\tand\r\nlines stay"
