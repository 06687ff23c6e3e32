"""Verdicts a person reads (issue 27): the compile line says what happened, compiler messages point at the user's
file and line (or `kernel.cu` and the line, never the compile cache's work folder), and kernel names are
demangled and whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from ksci.evaluate.results import CompileResult, KernelResources, Status, Verdict
from ksci.evaluate.toolchain.compile import cache_key, compile_source
from ksci.evaluate.toolchain.toolchains import Toolchain, demangle, find_toolchain, parse_ptxas
from ksci.report.summary import format_verdict

ROOT = Path(__file__).resolve().parent.parent
# What nvcc -Xptxas -v printed for kernels/fp8_gemm/solutions/correct/mma_tuned.cu (a kernel in an anonymous
# namespace: the mangled name carries the file's hash).
MANGLED = "_ZN41_GLOBAL__N__49366a17_9_kernel_cu_fp8_gemm19fp8_gemm_mma_kernelEPKhS1_PKfS3_P13__nv_bfloat16iii"
READABLE = (
    "(anonymous namespace)::fp8_gemm_mma_kernel(unsigned char const*, unsigned char const*, float const*, "
    "float const*, __nv_bfloat16*, int, int, int)"
)
needs_cxxfilt = pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) is not installed")


def _compiled(ok: bool, log: str = "", **fields) -> CompileResult:
    return CompileResult(
        ok=ok, target="cuda", arch="sm_90a", toolchain="Cuda compilation tools, release 13.0", command=["nvcc"],
        log=log, seconds=1.5, **fields,
    )  # fmt: skip


def test_a_compile_error_says_the_compile_failed():
    verdict = Verdict(Status.COMPILE_ERROR, "fp8_gemm", "cuda", message="k.cu(8): error", compile=_compiled(False))
    text = format_verdict(verdict)
    assert "compile failed for sm_90a after 1.5 s: Cuda compilation tools" in text
    assert "compiled for" not in text


def test_a_cached_build_and_a_refused_library_say_so():
    cached = format_verdict(Verdict(Status.COMPILED, "p", "cuda", compile=_compiled(True, cached=True)))
    assert "compiled for sm_90a in 1.5 s (the result cached from an earlier build)" in cached
    refused = _compiled(False, rejected="the library imports dlopen")
    text = format_verdict(Verdict(Status.REJECTED, "p", "cuda", message="the library imports dlopen", compile=refused))
    assert "compiled for sm_90a in 1.5 s, then refused" in text


def test_a_source_no_compiler_saw_gets_no_compile_line():
    screened = CompileResult(False, "cuda", "", "", [], "asm is not allowed", rejected="asm is not allowed")
    text = format_verdict(Verdict(Status.REJECTED, "p", "cuda", message="asm is not allowed", compile=screened))
    assert "compile" not in text.replace("compile_error", "") and "0.0 s" not in text


def test_kernel_names_are_shown_whole():
    long_name = "fp8_gemm_mma_kernel<128, 128, 64, 4, true>(unsigned char const*, unsigned char const*, int)"
    compiled = _compiled(True, resources=[KernelResources(name=long_name, registers=179, spill_bytes=0)])
    text = format_verdict(Verdict(Status.COMPILED, "p", "cuda", compile=compiled))
    assert f"    {long_name}: registers 179" in text


@needs_cxxfilt
def test_ptxas_names_are_demangled():
    log = (
        f"ptxas info    : Compiling entry function '{MANGLED}' for 'sm_90a'\n"
        f"ptxas info    : Function properties for {MANGLED}\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 179 registers, used 1 barriers\n"
    )
    (kernel,) = parse_ptxas(log)
    assert (kernel.name, kernel.registers) == (READABLE, 179)


def test_without_a_demangler_names_stay_as_they_were(monkeypatch):
    monkeypatch.setattr("ksci.evaluate.toolchain.toolchains._DEMANGLERS", ("no-such-demangler",))
    assert demangle([MANGLED, "plain_c_name"]) == [MANGLED, "plain_c_name"]


@needs_cxxfilt
def test_a_cached_build_from_before_reads_like_a_new_one(tmp_path):
    """A cache entry written before this change (the work folder's path in the log, a mangled name) is shown
    with kernel.cu and the demangled name; no compiler runs for a hit."""
    toolchain = Toolchain("cuda", "/nonexistent/nvcc", "release 13.0")
    source = "__global__ void k() {}\n"
    entry = tmp_path / cache_key(source, toolchain, "sm_90a", ())
    entry.mkdir()
    old_log = f'{tmp_path}/.{entry.name}-abc123/kernel.cu(8): error: expected a ";"\n'
    old = _compiled(False, log=old_log, resources=[KernelResources(name=MANGLED, registers=179)])
    (entry / "result.json").write_text(json.dumps(asdict(old)))
    hit = compile_source(source, toolchain, "sm_90a", tmp_path)
    assert hit.cached and hit.log == 'kernel.cu(8): error: expected a ";"\n'
    assert hit.resources[0].name == READABLE
    named = compile_source(source, toolchain, "sm_90a", tmp_path, source_name="my/gemm.cu")
    assert named.log.startswith("my/gemm.cu(8): error")


@pytest.mark.hip_gfx942
def test_a_hip_compile_error_names_the_file_and_line(tmp_path):
    source = "#include <hip/hip_runtime.h>\n__global__ void k(float* x) {\n  x[0] = undeclared_name;\n}\n"
    toolchain = find_toolchain("rocm", "gfx942")
    bare = compile_source(source, toolchain, "gfx942", tmp_path)
    assert not bare.ok and "kernel.hip:3:10: error: use of undeclared identifier 'undeclared_name'" in bare.log
    assert str(tmp_path) not in bare.log
    named = compile_source(source, toolchain, "gfx942", tmp_path, source_name="src/k.hip")
    assert named.cached and "src/k.hip:3:10: error" in named.log


@pytest.mark.nvcc
def test_evaluate_points_a_compile_error_at_the_users_file(tmp_path):
    src = ROOT / "kernels/fp8_gemm/solutions/wrong/syntax_error.cu"
    out = subprocess.run(
        [sys.executable, "-m", "ksci.cli", "evaluate", "--problem", "fp8_gemm", "--source", str(src), "--compile-only"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "KSCI_COMPILE_CACHE": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0] == "fp8_gemm [cuda]: compile_error"
    assert lines[1] == f'  {src}(8): error: expected a ";"'
    assert lines[2].startswith("  compile failed for sm_90a after ") and str(tmp_path) not in out.stdout
