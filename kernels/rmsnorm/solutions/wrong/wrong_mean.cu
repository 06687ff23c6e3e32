// expect: wrong
// Plays a kernel that divides the sum of squares by cols rounded up to the 256-wide tile (a padded count), not
// by cols. Right whenever cols % 256 == 0; caught by the cols = 1032 tests (divides by 1280).
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int THREADS = 256;
constexpr float EPS = 1e-6f;

__device__ __forceinline__ float bf16_to_float(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t float_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ weight, uint16_t* __restrict__ out,
               int cols) {
    __shared__ float warp_sum[THREADS / 32];
    const size_t base = (size_t)blockIdx.x * cols;
    const int t = threadIdx.x;
    float ss = 0.0f;
    for (int c = t; c < cols; c += THREADS) {
        const float a = bf16_to_float(x[base + c]);
        ss += a * a;
    }
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (t % 32 == 0) warp_sum[t / 32] = ss;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < THREADS / 32; ++i) total += warp_sum[i];
    const float rstd = rsqrtf(total / (float)((cols + 255) / 256 * 256) + EPS);
    for (int c = t; c < cols; c += THREADS)
        out[base + c] = float_to_bf16(bf16_to_float(x[base + c]) * rstd * bf16_to_float(weight[c]));
}

extern "C" int rmsnorm(const void* x, const void* weight, void* out, int rows, int cols, void* stream) {
    if (rows <= 0 || cols <= 0) return 0;
    rmsnorm_kernel<<<rows, THREADS, 0, (cudaStream_t)stream>>>(
        (const uint16_t*)x, (const uint16_t*)weight, (uint16_t*)out, cols);
    return (int)cudaGetLastError();
}
