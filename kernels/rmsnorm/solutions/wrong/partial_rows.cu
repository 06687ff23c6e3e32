// expect: wrong
// Plays a kernel that handles two rows per block but launches rows / 2 blocks, so the last row
// is never written when rows is odd (tests with rows 1, 7 and 333); it stays NaN, as the harness poisons out.
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

// Each block normalises two adjacent rows, one per 128-thread half.
__global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ weight, uint16_t* __restrict__ out,
               int rows, int cols) {
    constexpr int HALF = THREADS / 2;
    __shared__ float warp_sum[THREADS / 32];
    const int row = blockIdx.x * 2 + threadIdx.x / HALF;
    const bool active = row < rows;
    const size_t base = (size_t)(active ? row : 0) * cols;
    const int t = threadIdx.x % HALF;
    float ss = 0.0f;
    for (int c = t; active && c < cols; c += HALF) {
        const float a = bf16_to_float(x[base + c]);
        ss += a * a;
    }
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0) warp_sum[threadIdx.x / 32] = ss;
    __syncthreads();
    if (!active) return;
    const int first_warp = (threadIdx.x / HALF) * (HALF / 32);
    float total = 0.0f;
    for (int i = 0; i < HALF / 32; ++i) total += warp_sum[first_warp + i];
    const float rstd = rsqrtf(total / (float)cols + EPS);
    for (int c = t; c < cols; c += HALF)
        out[base + c] = float_to_bf16(bf16_to_float(x[base + c]) * rstd * bf16_to_float(weight[c]));
}

extern "C" int rmsnorm(const void* x, const void* weight, void* out, int rows, int cols, void* stream) {
    const int pairs = rows / 2;  // the bug: (rows + 1) / 2 blocks are needed
    if (pairs <= 0 || cols <= 0) return 0;
    rmsnorm_kernel<<<pairs, THREADS, 0, (cudaStream_t)stream>>>(
        (const uint16_t*)x, (const uint16_t*)weight, (uint16_t*)out, rows, cols);
    return (int)cudaGetLastError();
}
