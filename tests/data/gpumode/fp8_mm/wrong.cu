// expect: wrong
// Leaves out b_scale: every output off by B's block scales (drawn from randn, so of any sign and size).
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ float fnuz_to_float(uint8_t v) {
    const int exponent = (v >> 3) & 15, mantissa = v & 7;
    const float magnitude = exponent == 0 ? ldexpf((float)mantissa, -10) : ldexpf(1.0f + mantissa / 8.0f, exponent - 8);
    return (v & 0x80) ? -magnitude : magnitude;
}

__global__ void fp8_mm_no_b_scale(const uint8_t* a, const uint8_t* b, const float* a_scale, uint16_t* c, int m, int n,
                                  int k) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i >= m || j >= n) return;
    float acc = 0.0f;
    for (int kk = 0; kk < k; ++kk)
        acc += fnuz_to_float(a[i + (size_t)kk * m]) * a_scale[i + (size_t)(kk / 128) * m] *
               fnuz_to_float(b[j + (size_t)kk * n]);
    c[(size_t)i * n + j] = (uint16_t)(__float_as_uint(acc) >> 16);
}

extern "C" int fp8_mm(const void* a, const void* b, const void* a_scale, const void* b_scale, void* c, int m, int n,
                      int k, void* stream) {
    dim3 block(128), grid((n + 127) / 128, m);
    fp8_mm_no_b_scale<<<grid, block, 0, (cudaStream_t)stream>>>((const uint8_t*)a, (const uint8_t*)b,
                                                                (const float*)a_scale, (uint16_t*)c, m, n, k);
    return (int)cudaGetLastError();
}
