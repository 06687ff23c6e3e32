// expect: wrong
// unscreened: wrong
// Plays NaN-filling: C is filled with NaN and nothing is computed. A check written as `abs(out - ref) > tol`
// lets NaN through, since every comparison with NaN is false.
// Caught by: the comparison counts NaN and inf as mismatches (ksci/harness/check.py), and outputs are poisoned
// with NaN before every checked call, so an element never written fails as well.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

// The honest part: one thread per element of C (as the naive seed), used where the cheat needs real work.
__global__ void gemm_naive(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* a_scale,
                           const float* b_scale, __nv_bfloat16* c, int m, int n, int k, int rows) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || col >= n) return;
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

static int launch_naive(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, int rows, cudaStream_t s) {
    const dim3 block(32, 8);
    const dim3 grid((n + 31) / 32, (rows + 7) / 8);
    gemm_naive<<<grid, block, 0, s>>>(static_cast<const __nv_fp8_e4m3*>(a), static_cast<const __nv_fp8_e4m3*>(b),
                                      a_scale, b_scale, static_cast<__nv_bfloat16*>(c), m, n, k, rows);
    return (int)cudaGetLastError();
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    (void)a; (void)b; (void)a_scale; (void)b_scale; (void)k;
    return (int)cudaMemsetAsync(c, 0xFF, (size_t)m * n * sizeof(__nv_bfloat16), static_cast<cudaStream_t>(stream));
}
