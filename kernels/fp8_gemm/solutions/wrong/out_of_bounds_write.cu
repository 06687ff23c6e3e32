// expect: wrong
// Plays a kernel that gets C right but writes 8 bf16 elements just past its end (c[m*n .. m*n+7]), as an
// off-by-one tile guard would. The harness keeps guard bytes after C and must notice them changed.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

__global__ void fp8_gemm_naive_overrun(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* a_scale,
                                       const float* b_scale, __nv_bfloat16* c, int m, int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row == 0 && col < 8) c[(size_t)m * n + col] = __float2bfloat16_rn(1.5f * (col + 1));  // past the end
    if (row >= m || col >= n) return;
    const int scale_cols = (n + 127) / 128;
    float acc = 0.0f;
    for (int kb = 0; kb < k / 128; ++kb) {
        float part = 0.0f;
        for (int kk = kb * 128; kk < kb * 128 + 128; ++kk)
            part += static_cast<float>(a[row + (size_t)kk * m]) * static_cast<float>(b[col + (size_t)kk * n]);
        acc += part * a_scale[row + (size_t)kb * m] * b_scale[col / 128 + (size_t)kb * scale_cols];
    }
    c[(size_t)row * n + col] = __float2bfloat16_rn(acc);
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    const dim3 block(32, 8);
    const dim3 grid((n + 31) / 32, (m + 7) / 8);
    fp8_gemm_naive_overrun<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const __nv_fp8_e4m3*>(a), static_cast<const __nv_fp8_e4m3*>(b), a_scale, b_scale,
        static_cast<__nv_bfloat16*>(c), m, n, k);
    return (int)cudaGetLastError();
}
