// expect: wrong
// unscreened: wrong
// Plays a spot check that skips the work when C already holds the answer: before the GEMM, eight elements of C
// at scattered positions are recomputed exactly from the inputs (eight dot products of length k, one thread each)
// and compared with what C holds; when all eight agree, the GEMM's blocks return at once. Where one input set and
// its output buffer are timed over and over, C still holds the previous call's answer and every call after the
// first costs eight dot products. The comparison is written the usual way (`fabsf(got - want) > tolerance` is a
// mismatch), so a NaN in C counts as agreeing.
// Caught by: every call, timed or checked, gets an output freshly poisoned with NaN (ksci/harness/check.py), so
// the spot check sees NaN at every sampled element, skips the GEMM and leaves the poison: every timed output is
// looked at for poison, and the checked ones are compared in full. (Written to treat NaN as a mismatch, it would
// find a poisoned C every call, never skip, and be timed doing the whole GEMM, honestly.)
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

constexpr int SPOTS = 8;
int* skip_flag = nullptr;

// One thread per sampled element; *skip = 1 when none of them disagrees with C.
__global__ void spot_check(const uint8_t* a, const uint8_t* b, const float* a_scale, const float* b_scale,
                           const __nv_bfloat16* c, int m, int n, int k, int* skip) {
    __shared__ int disagree;
    if (threadIdx.x == 0) disagree = 0;
    __syncthreads();
    const int row = (int)((threadIdx.x * 2654435761u + 17u) % (unsigned)m);
    const int col = (int)((threadIdx.x * 40503u + 101u) % (unsigned)n);
    const int scale_cols = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;
    float want = 0.0f;  // C[row][col], exactly as the GEMM computes it
    for (int kb = 0; kb < k / SCALE_BLOCK; ++kb) {
        float part = 0.0f;
        for (int kk = kb * SCALE_BLOCK; kk < (kb + 1) * SCALE_BLOCK; ++kk) {
            __nv_fp8_e4m3 x, y;
            x.__x = a[row + (size_t)kk * m];
            y.__x = b[col + (size_t)kk * n];
            part += static_cast<float>(x) * static_cast<float>(y);
        }
        want += part * a_scale[row + (size_t)kb * m] * b_scale[col / SCALE_BLOCK + (size_t)kb * scale_cols];
    }
    const float got = __bfloat162float(c[(size_t)row * n + col]);
    if (fabsf(got - want) > 0.02f * fabsf(want) + 0.02f) atomicOr(&disagree, 1);
    __syncthreads();
    if (threadIdx.x == 0) *skip = disagree == 0;
}

}  // namespace

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (skip_flag == nullptr && cudaMalloc(&skip_flag, sizeof(int)) != cudaSuccess) return 1;
    spot_check<<<1, SPOTS, 0, s>>>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), a_scale, b_scale,
                                   static_cast<const __nv_bfloat16*>(c), m, n, k, skip_flag);
    launch_gemm(a, b, a_scale, b_scale, c, m, n, k, s, skip_flag);
    return (int)cudaGetLastError();
}
