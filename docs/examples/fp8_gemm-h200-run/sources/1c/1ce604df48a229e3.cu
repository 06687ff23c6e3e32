// ksci: rendered from cuda/naive with BLOCK_X=32 BLOCK_Y=4
// Block-scaled FP8 GEMM, the plain baseline: one thread per output element.
//
// C[i][j] = sum_kb a_scale[i,kb] * b_scale[j/128,kb] * sum_{k in block kb} A[i,k] * B[j,k], stored as bf16.
// threadIdx.x runs along N, so neighbouring threads read neighbouring bytes of B (N-contiguous) and write
// neighbouring elements of C (row-major); every thread of a row reads the same A element (a broadcast).
//
// Parameters: BLOCK_X x BLOCK_Y threads per block (BLOCK_X along N, BLOCK_Y along M).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace {

constexpr int BLOCK_X = 32;
constexpr int BLOCK_Y = 4;
constexpr int SCALE_BLOCK = 128;  // the scale block edge along K (A and B) and along N (B)

static_assert(BLOCK_X * BLOCK_Y <= 1024, "BLOCK_X * BLOCK_Y must be at most 1024 threads");
static_assert((BLOCK_X * BLOCK_Y) % 32 == 0, "BLOCK_X * BLOCK_Y must be a multiple of the warp size");

__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
    fp8_gemm_naive_kernel(const __nv_fp8_e4m3* __restrict__ a, const __nv_fp8_e4m3* __restrict__ b,
                          const float* __restrict__ a_scale, const float* __restrict__ b_scale,
                          __nv_bfloat16* __restrict__ c, int m, int n, int k) {
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= m || col >= n) return;

    const int kblocks = k / SCALE_BLOCK;
    const int scale_cols = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;
    float acc = 0.0f;
    for (int kb = 0; kb < kblocks; ++kb) {
        float part = 0.0f;
        for (int kk = 0; kk < SCALE_BLOCK; ++kk) {
            const size_t kidx = (size_t)kb * SCALE_BLOCK + kk;
            part += static_cast<float>(a[row + kidx * m]) * static_cast<float>(b[col + kidx * n]);
        }
        acc += part * a_scale[row + (size_t)kb * m] * b_scale[col / SCALE_BLOCK + (size_t)kb * scale_cols];
    }
    c[(size_t)row * n + col] = __float2bfloat16_rn(acc);
}

}  // namespace

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    const dim3 block(BLOCK_X, BLOCK_Y);
    const dim3 grid((n + BLOCK_X - 1) / BLOCK_X, (m + BLOCK_Y - 1) / BLOCK_Y);
    fp8_gemm_naive_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const __nv_fp8_e4m3*>(a), static_cast<const __nv_fp8_e4m3*>(b), a_scale, b_scale,
        static_cast<__nv_bfloat16*>(c), m, n, k);
    return (int)cudaGetLastError();
}
