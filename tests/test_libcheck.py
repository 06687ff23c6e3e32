"""The compiled library's imports and load-time code against the allowlist (ksci/evaluate/screen/library.py), built by the real
compilers: what a library may call does not depend on how its source spells it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ksci.evaluate.host_stages import compile_candidate
from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.screen.library import check_library
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem

KERNEL = """
#include <cuda_runtime.h>
{prelude}
__global__ void fill(float* x) {{ x[threadIdx.x] = 1.0f; }}
extern "C" int entry(float* x, void* stream) {{
    {body}
    fill<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(x);
    return static_cast<int>(cudaGetLastError());
}}
"""

# Each spelt so that the static screen does not see it (declared under another name, or through a macro).
CHEATS = {
    "python_c_api": (
        'extern "C" void* import_module(const char*) __asm__("Py" "Import_ImportModule");',
        'if (x == nullptr) import_module("torch");',
        "PyImport_ImportModule",
    ),
    "thread": (
        'extern "C" int spawn(void*, void*, void*, void*) __asm__("pthread" "_create");',
        "if (x == nullptr) spawn(nullptr, nullptr, nullptr, nullptr);",
        "pthread_create",
    ),
    "mapped_host_memory": (
        "",
        "static void* seen = nullptr; if (!seen) cudaHostAlloc(&seen, 4096, cudaHostAllocMapped);",
        "cudaHostAlloc",
    ),
    "hidden_stream": (
        'extern "C" cudaError_t make_queue(cudaStream_t*, unsigned) __asm__("cudaStream" "CreateWithFlags");',
        "static cudaStream_t q = nullptr; if (!q) make_queue(&q, cudaStreamNonBlocking);",
        "cudaStreamCreateWithFlags",
    ),
    "clock": (
        "#include <ctime>",
        "if (x == nullptr) { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); }",
        "clock_gettime",
    ),
}
LOAD_TIME = {
    "constructor": '#define AT_LOAD __attribute__((constructor))\nextern "C" AT_LOAD void early() {}',
    "static_object": "struct Early { Early() { volatile int y = 0; (void)y; } };\nEarly early;",
}


def _build(tmp_path: Path, name: str, source: str) -> str:
    compiled = compile_source(source, find_toolchain("cuda"), "sm_90a", tmp_path / name)
    assert compiled.ok, compiled.log[-2000:]
    return compiled.library


@pytest.mark.nvcc
def test_every_shipped_cuda_kernel_passes_and_every_cheat_is_refused(tmp_path):
    honest = {"seed:" + t.name: render_kernel(t) for t in load_problem("fp8_gemm").templates_for("cuda")}
    honest.update({p.name: p.read_text() for p in load_problem("fp8_gemm").solutions("correct") if p.suffix == ".cu"})
    cheats = {name: KERNEL.format(prelude=p, body=b) for name, (p, b, _) in CHEATS.items()}
    cheats.update({name: KERNEL.format(prelude=p, body="") for name, p in LOAD_TIME.items()})
    sources = {**honest, **cheats}
    with ThreadPoolExecutor(max_workers=4) as pool:
        libraries = dict(zip(sources, pool.map(lambda n: _build(tmp_path, n, sources[n]), sources), strict=True))
    for name in honest:
        result = check_library(libraries[name], "cuda")
        assert result.ok, f"{name}: {result.message}"
        assert any(i.startswith("__cudaRegister") for i in result.imports)
    for name, (_, _, symbol) in CHEATS.items():
        result = check_library(libraries[name], "cuda")
        assert not result.ok and symbol in result.message, f"{name}: {result.message} {result.imports}"
    for name in LOAD_TIME:
        result = check_library(libraries[name], "cuda")
        assert not result.ok and "when it is loaded" in result.message, f"{name}: {result.initialisers}"


@pytest.mark.nvcc
def test_a_plain_device_helper_passes(tmp_path):
    """nvcc gives every non-inline __device__ function a host stub that calls exit: an honest kernel with such a
    helper (the commonest way to write one) must pass, and did not before exit was allowed."""
    source = KERNEL.format(prelude="__device__ float twice(float v) { return 2.0f * v; }", body="").replace(
        "x[threadIdx.x] = 1.0f", "x[threadIdx.x] = twice(1.0f)"
    )
    result = check_library(_build(tmp_path, "device_helper", source), "cuda")
    assert "exit" in result.imports and result.ok, result.message


@pytest.mark.nvcc
def test_a_refused_library_is_a_rejected_candidate_never_loaded(tmp_path):
    """compile_candidate, the one path every compile takes, turns a refused library into `rejected`.

    The static screen refuses every cheat above by itself; qsort is a C library function it lets through (nothing
    dangerous, but outside the allowlist), so the library check is what refuses this one."""
    source = KERNEL.format(prelude="#include <cstdlib>", body="if (x == nullptr) qsort(nullptr, 0, 1, nullptr);")
    options = EvaluationOptions(target="cuda", arch="sm_90a", cache_dir=tmp_path)
    compiled = compile_candidate(source, options)
    assert not compiled.ok and compiled.library is None and "qsort" in compiled.rejected


@pytest.mark.hipcc
def test_shipped_hip_kernels_pass(tmp_path):
    for path in load_problem("fp8_gemm").solutions("correct"):
        if path.suffix == ".hip":
            compiled = compile_source(path.read_text(), find_toolchain("rocm", "gfx940"), "gfx940", tmp_path)
            assert compiled.ok, compiled.log[-2000:]
            result = check_library(compiled.library, "rocm")
            assert result.ok, f"{path.name}: {result.message}"


def test_a_file_that_is_not_elf_is_refused(tmp_path):
    junk = tmp_path / "kernel.so"
    junk.write_bytes(b"not an ELF file")
    result = check_library(junk, "cuda")
    assert not result.ok and "ELF" in result.message
