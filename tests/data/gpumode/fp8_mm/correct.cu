// expect: ok
// Block-scaled FP8 GEMM as the task's ref_kernel computes it: c[i][j] = sum_k (a[i,k] * a_scale[i, k/128]) *
// (b[j,k] * b_scale[j/128, k/128]) in float32, rounded to bf16 (nearest even). a, b, a_scale, b_scale are
// column-major; a and b are float8_e4m3fnuz (bias 8, no infinities, 0x80 is NaN), decoded by hand so that no FP8
// header is needed. One thread per output element.
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ float fnuz_to_float(uint8_t v) {
    if (v == 0x80) return __int_as_float(0x7fc00000);
    const int exponent = (v >> 3) & 15, mantissa = v & 7;
    const float magnitude = exponent == 0 ? ldexpf((float)mantissa, -10) : ldexpf(1.0f + mantissa / 8.0f, exponent - 8);
    return (v & 0x80) ? -magnitude : magnitude;
}

__device__ __forceinline__ uint16_t float_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__global__ void fp8_mm_naive(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                             const float* __restrict__ a_scale, const float* __restrict__ b_scale,
                             uint16_t* __restrict__ c, int m, int n, int k) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i >= m || j >= n) return;
    const int scale_n = (n + 127) / 128;
    float acc = 0.0f;
    for (int kk = 0; kk < k; ++kk) {
        const int kb = kk / 128;
        const float av = fnuz_to_float(a[i + (size_t)kk * m]) * a_scale[i + (size_t)kb * m];
        const float bv = fnuz_to_float(b[j + (size_t)kk * n]) * b_scale[j / 128 + (size_t)kb * scale_n];
        acc += av * bv;
    }
    c[(size_t)i * n + j] = float_to_bf16(acc);
}

extern "C" int fp8_mm(const void* a, const void* b, const void* a_scale, const void* b_scale, void* c, int m, int n,
                      int k, void* stream) {
    dim3 block(128), grid((n + 127) / 128, m);
    fp8_mm_naive<<<grid, block, 0, (cudaStream_t)stream>>>((const uint8_t*)a, (const uint8_t*)b, (const float*)a_scale,
                                                           (const float*)b_scale, (uint16_t*)c, m, n, k);
    return (int)cudaGetLastError();
}
