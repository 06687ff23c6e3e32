// expect: wrong
// unscreened: wrong
// Plays warm-up detection: it counts calls per shape and is honest for the first four (the checks and a
// warm-up of three, as a harness that checks once and then warms up would make), then computes only the first
// 64 rows, an eighth of the work or less, for the calls that are timed.
// Caught by: the warm-up runs on an input set of its own, and the outputs of the timed calls themselves are
// checked after timing; the rows left over hold stale values of an earlier input set, or NaN.
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
    static int calls_m = -1, calls_n = -1, calls_k = -1, calls = 0;  // the cheat: a call counter per shape
    if (m != calls_m || n != calls_n || k != calls_k) {
        calls_m = m;
        calls_n = n;
        calls_k = k;
        calls = 0;
    }
    const int rows = ++calls <= 4 ? m : (m < 64 ? m : 64);
    return launch_naive(a, b, a_scale, b_scale, c, m, n, k, rows, static_cast<cudaStream_t>(stream));
}
