// expect: rejected
// unscreened: suspicious
// Plays the same tampered timer as timer_python_first_call.cu, installed when the library is loaded, before any
// call or check: through a file-scope variable initialised by a lambda that is called on the spot, a load-time
// initialiser that the screen's lexical rule for initialisers does not recognise (it looks for a call in a plain
// initialiser, not for a lambda body).
// Caught by: the static screen (Python C API names, though not the initialiser) and the library check: the
// Py* imports, and a load-time initialiser (an .init_array entry) other than the toolchain's own. Without both:
// as timer_python_first_call.cu, the events no longer cover the call and the host's clock says so: `suspicious`.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

// The honest part: solutions/correct/smem_tiled.cu (64 x 64 tiles of C in shared memory), with a flag that lets
// the cheat skip it.
namespace {

constexpr int TILE = 64;         // C tile edge (M and N are multiples of 64, rows and columns are guarded anyway)
constexpr int SLICE = 32;        // K values staged per shared-memory round
constexpr int SCALE_BLOCK = 128;  // scale block edge along K (A and B) and along N (B)
constexpr int THREADS = 256;     // 16 x 16
constexpr int WORDS = SLICE * TILE / 4;  // 32-bit words of one operand slice

__device__ __forceinline__ float4 decode_e4m3x4(uint32_t w) {
    float f[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        __nv_fp8_e4m3 v;
        v.__x = static_cast<__nv_fp8_storage_t>((w >> (8 * q)) & 0xffu);
        f[q] = static_cast<float>(v);
    }
    return make_float4(f[0], f[1], f[2], f[3]);
}

// One slice of an operand ([k][x], x contiguous, ld = x extent) into dst[SLICE][TILE] as floats.
// Quads past `limit` read as zero (a quad is wholly in or out: the extents are multiples of 4).
__device__ __forceinline__ void stage_slice(float (*dst)[TILE], const uint8_t* __restrict__ src, int ld, int x0,
                                            int limit, int k0) {
#pragma unroll
    for (int w = threadIdx.x; w < WORDS; w += THREADS) {
        const int row = w / (TILE / 4);
        const int x = 4 * (w % (TILE / 4));
        uint32_t word = 0;
        if (x0 + x < limit) word = *reinterpret_cast<const uint32_t*>(src + (size_t)(k0 + row) * ld + x0 + x);
        *reinterpret_cast<float4*>(&dst[row][x]) = decode_e4m3x4(word);
    }
}

__global__ void __launch_bounds__(THREADS)
    gemm_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, const float* __restrict__ a_scale,
                const float* __restrict__ b_scale, __nv_bfloat16* __restrict__ c, int m, int n, int k,
                const int* skip) {
    if (skip != nullptr && *skip) return;  // the cheat decided (on the device) that this call needs no work

    __shared__ __align__(16) float as[SLICE][TILE];
    __shared__ __align__(16) float bs[SLICE][TILE];

    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    const int m0 = blockIdx.y * TILE;
    const int n0 = blockIdx.x * TILE;
    const int scale_cols = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;

    float acc[4][4] = {};
    for (int kb = 0; kb < k / SCALE_BLOCK; ++kb) {
        float part[4][4] = {};
        for (int ks = 0; ks < SCALE_BLOCK; ks += SLICE) {
            __syncthreads();  // the previous slice has been read by every thread
            stage_slice(as, a, m, m0, m, kb * SCALE_BLOCK + ks);
            stage_slice(bs, b, n, n0, n, kb * SCALE_BLOCK + ks);
            __syncthreads();
#pragma unroll 8
            for (int kk = 0; kk < SLICE; ++kk) {
                float av[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) part[i][j] = fmaf(av[i], bv[j], part[i][j]);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int row = min(m0 + ty + 16 * i, m - 1);  // rows past m are computed but never stored
            const float sa = a_scale[row + (size_t)kb * m];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int col = min(n0 + tx + 16 * j, n - 1);
                acc[i][j] += part[i][j] * sa * b_scale[col / SCALE_BLOCK + (size_t)kb * scale_cols];
            }
        }
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int row = m0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = n0 + tx + 16 * j;
            if (row < m && col < n) c[(size_t)row * n + col] = __float2bfloat16_rn(acc[i][j]);
        }
    }
}

// The whole GEMM on `stream`; its blocks return at once when *skip is non-zero.
void launch_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m, int n,
                 int k, cudaStream_t stream, const int* skip = nullptr) {
    const dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    gemm_kernel<<<grid, THREADS, 0, stream>>>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), a_scale,
                                              b_scale, static_cast<__nv_bfloat16*>(c), m, n, k, skip);
}

}  // namespace

// CPython's C API, declared by hand (PyGILState_STATE is an enum).
extern "C" {
int PyGILState_Ensure(void);
void PyGILState_Release(int);
int PyRun_SimpleString(const char*);
}

namespace {

// Every interval read just after a call of this library reports half.
const char* const WRAP_TIMER =
    "import torch\n"
    "_E = torch.cuda.Event\n"
    "if not hasattr(_E, '_true_elapsed'):\n"
    "    _E._true_elapsed, _E._marked = _E.elapsed_time, False\n"
    "    def _elapsed(self, end):\n"
    "        t = _E._true_elapsed(self, end)\n"
    "        if _E._marked:\n"
    "            _E._marked = False\n"
    "            return t / 2\n"
    "        return t\n"
    "    _E.elapsed_time = _elapsed\n";

int run_python(const char* code) {
    const int gil = PyGILState_Ensure();
    const int failed = PyRun_SimpleString(code);
    PyGILState_Release(gil);
    return failed;
}

}  // namespace

// Runs while the library is being loaded (the harness's Python holds the GIL then; PyGILState_Ensure allows that).
static const int timer_wrapped = [] { return run_python(WRAP_TIMER) == 0 ? 1 : 0; }();

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    if (timer_wrapped) run_python("import torch\ntorch.cuda.Event._marked = True\n");
    launch_gemm(a, b, a_scale, b_scale, c, m, n, k, static_cast<cudaStream_t>(stream));
    return (int)cudaGetLastError();
}
