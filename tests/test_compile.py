import shutil

import pytest

from ksci.evaluate.toolchain.compile import cache_key, compile_source, source_hash
from ksci.evaluate.toolchain.toolchains import Toolchain, find_toolchain, parse_amdgpu_remarks, parse_ptxas

KERNEL = """
#include <cuda_runtime.h>
__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
extern "C" int run(float* x, int n, void* stream) {
  scale<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(x, n);
  return (int)cudaGetLastError();
}
"""


def test_a_comment_ending_in_a_backslash_is_another_program():
    # Lines are spliced before comments are removed: the comment swallows the next line, so these differ.
    spliced = "int x = 1; // note \\\nx = 2;\n"
    plain = "int x = 1; // note\nx = 2;\n"
    assert spliced != plain and source_hash(spliced) != source_hash(plain)
    tc = Toolchain("cuda", "/usr/bin/nvcc", "release 13.0")
    assert cache_key(spliced, tc, "sm_90a", ()) != cache_key(plain, tc, "sm_90a", ())


def test_the_key_is_the_exact_text():
    a = 'int  x = 1; // note\n/* block */ const char* s = "a  b";'
    assert source_hash(a) == source_hash(str(a))
    # Layout and comments count too: a newline ends a directive and __LINE__ sees every line.
    assert source_hash("#define A 1\nint x = A;") != source_hash("#define A 1 int x = A;")
    assert source_hash(a) != source_hash(a.replace("// note", "// other"))
    assert source_hash(a) != source_hash(a.replace('"a  b"', '"a b"'))


def test_cache_key_covers_flags_arch_and_toolchain_version():
    tc = Toolchain("cuda", "/usr/bin/nvcc", "release 13.0")
    key = cache_key(KERNEL, tc, "sm_90a", ())
    assert key == cache_key(KERNEL, Toolchain("cuda", "/usr/bin/nvcc", "release 13.0"), "sm_90a", ())
    assert key != cache_key(KERNEL + "\n// comment\n", tc, "sm_90a", ())
    assert key != cache_key(KERNEL, tc, "sm_80", ())
    assert key != cache_key(KERNEL, tc, "sm_90a", ("-DX=1",))
    assert key != cache_key(KERNEL, Toolchain("cuda", "/usr/bin/nvcc", "release 13.1"), "sm_90a", ())


def test_cache_key_covers_the_toolchains_own_flags(monkeypatch):
    tc = Toolchain("cuda", "/usr/bin/nvcc", "release 13.0")
    key = cache_key(KERNEL, tc, "sm_90a", ())
    command = Toolchain.command
    monkeypatch.setattr(Toolchain, "command", lambda self, *a, **k: [*command(self, *a, **k), "-cudart", "static"])
    assert cache_key(KERNEL, tc, "sm_90a", ()) != key


@pytest.mark.nvcc
def test_compile_caches_by_exact_source(tmp_path):
    tc = find_toolchain("cuda")
    first = compile_source(KERNEL, tc, "sm_90a", tmp_path)
    assert first.ok and not first.cached, first.log
    assert first.resources and first.resources[0].registers > 0
    again = compile_source(KERNEL, tc, "sm_90a", tmp_path)
    assert again.cached and again.library == first.library and again.resources == first.resources
    # The backslash makes the comment swallow the doubling: another program, another build.
    spliced = KERNEL.replace("if (i < n) x[i] *= 2.0f; }", "// guarded \\\n if (i < n) x[i] *= 2.0f;\n}")
    other = compile_source(spliced, tc, "sm_90a", tmp_path)
    assert other.ok and not other.cached and other.library != first.library, other.log


@pytest.mark.nvcc
def test_compile_error_is_a_value_with_the_log(tmp_path):
    result = compile_source(
        KERNEL.replace("x[i] *= 2.0f;", "x[i] *= undefined_name;"), find_toolchain("cuda"), "sm_90a", tmp_path
    )
    assert not result.ok and result.library is None
    assert "undefined_name" in result.log


@pytest.mark.hipcc
def test_hip_compile_reports_vgprs_and_lds(tmp_path):
    source = """
#include <hip/hip_runtime.h>
__global__ void k(float* x) { __shared__ float s[256]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads();
  x[threadIdx.x] = s[255 - threadIdx.x]; }
extern "C" int run(float* x, void* stream) { hipLaunchKernelGGL(k, dim3(1), dim3(256), 0, (hipStream_t)stream, x);
  return (int)hipGetLastError(); }
"""
    result = compile_source(source, find_toolchain("rocm"), "gfx940", tmp_path)
    assert result.ok, result.log
    (kernel,) = result.resources
    assert kernel.registers > 0 and kernel.shared_bytes == 1024 and kernel.spill_bytes == 0


def test_parse_ptxas_report():
    log = """ptxas info    : Compiling entry function '_Z5scalePfi' for 'sm_90a'
ptxas info    : Function properties for _Z5scalePfi
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 364 bytes cmem[0]"""
    (k,) = parse_ptxas(log)
    # The name demangled (c++filt, from binutils), as the reader wrote it.
    assert (k.name, k.registers, k.shared_bytes, k.spill_bytes, k.stack_or_scratch_bytes) == (
        "scale(float*, int)" if shutil.which("c++filt") else "_Z5scalePfi",
        40,
        8192,
        4,
        8,
    )


def test_parse_amdgpu_remarks():
    tag = "[-Rpass-analysis=kernel-resource-usage]"
    log = "\n".join(
        f"remark: k.hip:3:0: {line} {tag}"
        for line in [
            "Function Name: _Z1kPf",
            "    SGPRs: 14",
            "    VGPRs: 6",
            "    AGPRs: 4",
            "    ScratchSize [bytes/lane]: 16",
            "    Occupancy [waves/SIMD]: 8",
            "    SGPRs Spill: 0",
            "    VGPRs Spill: 3",
            "    LDS Size [bytes/block]: 1024",
        ]
    )
    (k,) = parse_amdgpu_remarks(log)
    assert (k.registers, k.sgprs, k.agprs, k.spill_bytes, k.shared_bytes, k.stack_or_scratch_bytes, k.occupancy) == (
        6,
        14,
        4,
        3,
        1024,
        16,
        8,
    )
