// expect: wrong
// Plays: an off-by-one in scale indexing. It reads the B scale of the next 128-column block (clamped to the
// last one), so every column tile but the last gets the wrong b_scale. Otherwise correct/smem_tiled.cu.
// Block-scaled FP8 GEMM on CUDA cores with shared-memory tiling (no tensor cores).
//
// C[i][j] = sum_kb a_scale[i,kb] * b_scale[j/128,kb] * sum_{k in block kb} A[i,k] * B[j,k], stored as bf16.
//
// fp8_gemm_kmajor: A (M x K) and B (N x K) are K-major (a[i*K + k], b[j*K + k]). A copy of
// kernels/fp8_gemm/solutions/correct/smem_tiled.cu whose staging reads the K-major operands byte by byte.
// A block of 16 x 16 threads computes a 64 x 64 tile of C, 4 x 4 outputs per thread (rows ty + 16i, columns
// tx + 16j). Each 128-wide K block is walked in 4 slices of 32: the slice of A and of B is gathered, decoded
// from FP8 to float and stored [k][m] / [k][n] into shared memory, and every thread accumulates
// its 16 products into a partial sum that is scaled and added to the result at the end of the K block.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

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

// One slice of an operand ([x][k], k contiguous, ld = K) into dst[SLICE][TILE] as floats.
// Quads past `limit` read as zero (a quad is wholly in or out: the extents are multiples of 4).
__device__ __forceinline__ void stage_slice(float (*dst)[TILE], const uint8_t* __restrict__ src, int ld, int x0,
                                            int limit, int k0) {
#pragma unroll
    for (int w = threadIdx.x; w < WORDS; w += THREADS) {
        const int row = w / (TILE / 4);
        const int x = 4 * (w % (TILE / 4));
        uint32_t word = 0;
        if (x0 + x < limit)
#pragma unroll
            for (int q = 0; q < 4; ++q) word |= uint32_t(src[(size_t)(x0 + x + q) * ld + k0 + row]) << (8 * q);
        *reinterpret_cast<float4*>(&dst[row][x]) = decode_e4m3x4(word);
    }
}

__global__ void __launch_bounds__(THREADS)
    fp8_gemm_smem_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                         const float* __restrict__ a_scale, const float* __restrict__ b_scale,
                         __nv_bfloat16* __restrict__ c, int m, int n, int k) {
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
            stage_slice(as, a, k, m0, m, kb * SCALE_BLOCK + ks);
            stage_slice(bs, b, k, n0, n, kb * SCALE_BLOCK + ks);
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
                acc[i][j] += part[i][j] * sa * b_scale[min(col / SCALE_BLOCK + 1, scale_cols - 1) + (size_t)kb * scale_cols];
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

}  // namespace

extern "C" int fp8_gemm_kmajor(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c,
                               int m, int n, int k, void* stream) {
    const dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    fp8_gemm_smem_kernel<<<grid, THREADS, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), a_scale, b_scale,
        static_cast<__nv_bfloat16*>(c), m, n, k);
    return (int)cudaGetLastError();
}
