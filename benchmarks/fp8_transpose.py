"""The fp8_gemm wgmma template's transpose pre-pass alone, beside a device-to-device copy of the same bytes.

fp8_gemm's A (M x K) and B (N x K) arrive column-major; the wgmma template transposes both into K-major copies in
a workspace (one launch), then runs the K-major GEMM core. This script renders the template (default point), appends
a small driver to the same translation unit (so it calls the template's own `launch_transpose_to_kmajor<ROWS>` and
`launch_kmajor_gemm`), builds it with ksci's compile path, and then:

- checks every variant byte-exact against torch (`a.t().contiguous()`) on every test and benchmark shape, random
  bytes in, the workspace poisoned before each call;
- times, per benchmark shape, with CUDA events (L2 flushed before each call, median of --reps): each pre-pass
  variant (`rows64`, `rows128`: the template's tile of 64 or 128 rows x 128 k; `legacy`: the pre-pass before
  this rewrite, a copy of which is kept below), a device-to-device copy of the same 2 (M + N) K bytes (the
  bandwidth ceiling; also a plain 16-byte copy kernel, and an empty launch for the fixed cost), the GEMM core
  alone on the K-major copies, the whole fp8_gemm entry point, and the legacy pre-pass followed by the same core.

    PYTHONPATH=$PWD python3 benchmarks/fp8_transpose.py [--reps 50] [--out DIR]

A table goes to stdout and fp8_transpose.log, the numbers to fp8_transpose.json (under --out, default $OUT).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

import torch
from hopper_fp8 import geomean, time_us  # the same timing as the whole-kernel benchmark (this folder)

from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.toolchains import find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem

# The pre-pass as it was before the 16-byte rewrite (64 x 64 tiles, single-byte gathers from shared memory, 16-byte
# stores to 64 rows per warp), kept here only to be timed beside the current one.
LEGACY = r"""
namespace ksci_legacy {
constexpr int T_ROWS = 64;
constexpr int T_K = 64;
constexpr int T_PITCH = T_ROWS + 16;
__global__ void __launch_bounds__(256)
    transpose_to_kmajor(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, uint8_t* __restrict__ at,
                        uint8_t* __restrict__ bt, int m, int n, int k) {
    __shared__ __align__(16) uint8_t tile[T_K * T_PITCH];
    const int k_tiles = k / T_K;
    const int a_blocks = ((m + T_ROWS - 1) / T_ROWS) * k_tiles;
    int block = blockIdx.x;
    const bool is_a = block < a_blocks;
    if (!is_a) block -= a_blocks;
    const uint8_t* src = is_a ? a : b;
    uint8_t* dst = is_a ? at : bt;
    const int rows = is_a ? m : n;
    const int r0 = (block / k_tiles) * T_ROWS;
    const int k0 = (block % k_tiles) * T_K;
    {
        const int kr = threadIdx.x / 4;
        const int chunk = threadIdx.x % 4;
        if (r0 + 16 * chunk < rows) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(src + (size_t)(k0 + kr) * rows + r0 + 16 * chunk));
            *reinterpret_cast<uint4*>(tile + kr * T_PITCH + 16 * chunk) = v;
        }
    }
    __syncthreads();
    {
        const int r = threadIdx.x % T_ROWS;
        const int kc = threadIdx.x / T_ROWS;
        uint32_t w[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint8_t* p = tile + (16 * kc + 4 * q) * T_PITCH + r;
            w[q] = uint32_t(p[0]) | (uint32_t(p[T_PITCH]) << 8) | (uint32_t(p[2 * T_PITCH]) << 16) |
                   (uint32_t(p[3 * T_PITCH]) << 24);
        }
        if (r0 + r < rows)
            *reinterpret_cast<uint4*>(dst + (size_t)(r0 + r) * k + k0 + 16 * kc) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
}  // namespace ksci_legacy
"""

DRIVER = r"""
extern "C" int ksci_transpose(int variant, const void* a, const void* b, void* at, void* bt, int m, int n, int k,
                              void* stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    uint8_t* at8 = static_cast<uint8_t*>(at);
    uint8_t* bt8 = static_cast<uint8_t*>(bt);
    switch (variant) {
        case 0: {
            const int blocks = ((m + 63) / 64 + (n + 63) / 64) * (k / 64);
            ksci_legacy::transpose_to_kmajor<<<blocks, 256, 0, s>>>(static_cast<const uint8_t*>(a),
                                                                     static_cast<const uint8_t*>(b), at8, bt8, m, n, k);
            return (int)cudaGetLastError();
        }
        case 64: return (int)launch_transpose_to_kmajor<64>(a, b, at8, bt8, m, n, k, s);
        case 128: return (int)launch_transpose_to_kmajor<128>(a, b, at8, bt8, m, n, k, s);
    }
    return (int)cudaErrorInvalidValue;
}

namespace ksci_floor_kernels {
__global__ void empty_kernel() {}
// A plain copy kernel: 4 x 16-byte loads in flight per thread, then 4 stores (a second bandwidth ceiling).
__global__ void __launch_bounds__(256) copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n16) {
    const size_t base = (size_t)blockIdx.x * 1024 + threadIdx.x;
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (base + 256 * j < n16) v[j] = __ldg(src + base + 256 * j);
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (base + 256 * j < n16) dst[base + 256 * j] = v[j];
}
}  // namespace ksci_floor_kernels

extern "C" int ksci_floor(int which, const void* src, void* dst, size_t bytes, void* stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (which == 0) {
        ksci_floor_kernels::empty_kernel<<<1, 32, 0, s>>>();
    } else {
        const size_t n16 = bytes / 16;
        ksci_floor_kernels::copy16<<<(unsigned)((n16 + 1023) / 1024), 256, 0, s>>>(static_cast<const uint4*>(src),
                                                                             static_cast<uint4*>(dst), n16);
    }
    return (int)cudaGetLastError();
}

// The whole kernel with the legacy pre-pass (same core), for the before/after comparison.
extern "C" int ksci_whole_legacy(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c,
                                 int m, int n, int k, void* at, void* bt, void* stream) {
    const int rc = ksci_transpose(0, a, b, at, bt, m, n, k, stream);
    if (rc != 0) return rc;
    return launch_kmajor_gemm(at, bt, a_scale, b_scale, c, m, n, k, static_cast<cudaStream_t>(stream));
}

extern "C" int ksci_core(const void* at, const void* bt, const float* a_scale, const float* b_scale, void* c, int m,
                         int n, int k, void* stream) {
    return launch_kmajor_gemm(at, bt, a_scale, b_scale, c, m, n, k, static_cast<cudaStream_t>(stream));
}
"""

VARIANTS = {"legacy": 0, "rows64": 64, "rows128": 128}


def bench_shape(shape: dict, ref, fns: dict, stream: int, flush: torch.Tensor, reps: int) -> dict:
    """Times of one benchmark shape: each pre-pass variant, the copy ceiling, the core alone, the whole kernel."""
    transpose, core, whole = fns["transpose"], fns["core"], fns["whole"]
    m, n, k = shape["m"], shape["n"], shape["k"]
    inputs = ref.generate_input(shape, shape["seed"], "cuda", "cuda")
    a, b = inputs["a"].t(), inputs["b"].t()  # the (k x m), (k x n) buffers: A and B column-major
    ws = torch.empty((m + n) * k, dtype=torch.uint8, device="cuda")
    at, bt = ws[: m * k], ws[m * k :]
    src = torch.randint(0, 256, ((m + n) * k,), dtype=torch.uint8, device="cuda")
    ptrs = (a.data_ptr(), b.data_ptr(), at.data_ptr(), bt.data_ptr(), m, n, k, stream)
    row = {"shape": shape, "mbytes": 2 * (m + n) * k / 1e6}
    for name, variant in VARIANTS.items():
        row[name] = time_us(lambda v=variant: transpose(v, *ptrs), flush, reps)
    row["copy"] = time_us(lambda: ws.copy_(src), flush, reps)
    row["copy16"] = time_us(lambda: fns["floor"](1, src.data_ptr(), ws.data_ptr(), ws.numel(), stream), flush, reps)
    row["empty"] = time_us(lambda: fns["floor"](0, None, None, 0, stream), flush, reps)
    scales = (inputs["a_scale"].data_ptr(), inputs["b_scale"].data_ptr(), inputs["c"].data_ptr())
    transpose(VARIANTS["rows128"], *ptrs)
    row["core"] = time_us(lambda: core(at.data_ptr(), bt.data_ptr(), *scales, m, n, k, stream), flush, reps)
    row["whole"] = time_us(lambda: whole(a.data_ptr(), b.data_ptr(), *scales, m, n, k, stream), flush, reps)
    row["whole_legacy"] = time_us(
        lambda: fns["whole_legacy"](a.data_ptr(), b.data_ptr(), *scales, m, n, k, at.data_ptr(), bt.data_ptr(), stream),
        flush,
        reps,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", default=os.environ.get("OUT", "data/fp8_transpose"))
    parser.add_argument("--cache", default="/tmp/fp8_transpose_cache", help="compile cache (kept out of --out)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def log(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    started = time.time()
    problem = load_problem("fp8_gemm")
    template = problem.template("cuda", "wgmma")
    source = render_kernel(template) + LEGACY + DRIVER
    result = compile_source(source, find_toolchain("cuda"), "sm_90a", Path(args.cache))
    log("\n".join(ln for ln in result.log.splitlines() if "registers" in ln or "spill" in ln or "error" in ln))
    if not result.ok:
        log(result.log[-4000:])
        return 1
    lib = ctypes.CDLL(result.library)
    transpose = lib.ksci_transpose
    transpose.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    transpose.restype = ctypes.c_int
    core = lib.ksci_core
    core.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    core.restype = ctypes.c_int
    whole = lib.fp8_gemm
    whole.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    whole.restype = ctypes.c_int
    floor = lib.ksci_floor
    floor.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    floor.restype = ctypes.c_int
    whole_legacy = lib.ksci_whole_legacy
    whole_legacy.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 3 + [ctypes.c_void_p] * 3
    whole_legacy.restype = ctypes.c_int
    fns = {"transpose": transpose, "core": core, "whole": whole, "floor": floor, "whole_legacy": whole_legacy}
    stream = torch.cuda.current_stream().cuda_stream
    ref = problem.reference_module()
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")

    # Byte-exact check of every variant on every shape; random bytes in, a fresh poison byte per call.
    failures = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    for shape in [*problem.tests, *problem.benchmarks]:
        m, n, k = shape["m"], shape["n"], shape["k"]
        a = torch.randint(0, 256, (k, m), dtype=torch.uint8, device="cuda", generator=gen)
        b = torch.randint(0, 256, (k, n), dtype=torch.uint8, device="cuda", generator=gen)
        want_a, want_b = a.t().contiguous(), b.t().contiguous()
        for name, variant in VARIANTS.items():
            for poison in (0x00, 0xA5):
                at = torch.full((m, k), poison, dtype=torch.uint8, device="cuda")
                bt = torch.full((n, k), poison, dtype=torch.uint8, device="cuda")
                rc = transpose(variant, a.data_ptr(), b.data_ptr(), at.data_ptr(), bt.data_ptr(), m, n, k, stream)
                torch.cuda.synchronize()
                bad = int((at != want_a).sum()) + int((bt != want_b).sum()) if rc == 0 else -1
                if bad:
                    failures.append(f"{name} {m}x{n}x{k} poison {poison:#x}: rc={rc}, {bad} bytes wrong")
    log(
        f"byte-exact check, {len(VARIANTS)} variants x {len(problem.tests) + len(problem.benchmarks)} shapes: "
        + ("ok" if not failures else f"{len(failures)} FAILED: {failures[:6]}")
    )

    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    rows = [bench_shape(shape, ref, fns, stream, flush, args.reps) for shape in problem.benchmarks]
    cols = [*VARIANTS, "copy", "copy16", "empty", "core", "whole", "whole_legacy"]
    log(f"\n== pre-pass alone (us, median of {args.reps}, L2 flushed) ==")
    log(
        "copy: torch's D2D copy of the same 2(M+N)K bytes; copy16: a plain 16-byte copy kernel; empty: an empty launch;"
    )
    log("core: the GEMM alone on K-major copies; whole: fp8_gemm; whole_legacy: the legacy pre-pass + the same core;")
    log("best/copy: the faster of rows64 and rows128 over the faster copy; GB/s: 2(M+N)K bytes over that time")
    log(f"{'m x n x k':>18} {'MB':>6} " + " ".join(f"{c:>8}" for c in cols) + f" {'best/copy':>9} {'GB/s':>6}")
    for row in rows:
        s = row["shape"]
        best = min(row[v] for v in VARIANTS if v != "legacy")
        ceiling = min(row["copy"], row["copy16"])
        log(
            f"{s['m']:>6}x{s['n']:>5}x{s['k']:>5} {row['mbytes']:6.1f} "
            + " ".join(f"{row[c]:8.1f}" for c in cols)
            + f" {best / ceiling:9.2f} {row['mbytes'] * 1e3 / best:6.0f}"
        )
    gm = {c: geomean([r[c] for r in rows]) for c in cols}
    log(f"{'geomean':>18} {'':>6} " + " ".join(f"{gm[c]:8.1f}" for c in cols))
    (out / "fp8_transpose.json").write_text(json.dumps({"rows": rows, "failures": failures, "geomean": gm}, indent=1))
    log(f"done in {time.time() - started:.0f} s")
    (out / "fp8_transpose.log").write_text("\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
