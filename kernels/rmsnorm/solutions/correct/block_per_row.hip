// expect: ok
// HIP (MI300, wave64): one 256-thread block (4 wavefronts) per row, bf16 pairs read as 32-bit words when
// cols is even, scalar otherwise; wave64 shuffle reduction, then a 4-slot shared-memory sum.
#include <hip/hip_runtime.h>
#include <stdint.h>

constexpr int WAVE = 64;  // CDNA wavefront width; not warpSize, which is not constexpr in ROCm 7
constexpr int THREADS = 256;
constexpr int WAVES = THREADS / WAVE;
constexpr float EPS = 1e-6f;

__device__ __forceinline__ float bf16_bits_to_float(uint32_t h) { return __uint_as_float(h << 16); }

__device__ __forceinline__ uint32_t float_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x0040u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

__global__ void __launch_bounds__(THREADS)
rmsnorm_block_per_row(const uint16_t* __restrict__ x, const uint16_t* __restrict__ weight,
                      uint16_t* __restrict__ out, int cols, bool pairs) {
    __shared__ float wave_sum[WAVES];
    const uint16_t* xr = x + (size_t)blockIdx.x * cols;
    uint16_t* outr = out + (size_t)blockIdx.x * cols;
    const int t = threadIdx.x;

    float ss = 0.0f;
    if (pairs) {
        const uint32_t* x2 = reinterpret_cast<const uint32_t*>(xr);
        for (int p = t; p < cols / 2; p += THREADS) {
            const uint32_t w = x2[p];
            const float a = bf16_bits_to_float(w & 0xffffu), b = bf16_bits_to_float(w >> 16);
            ss += a * a + b * b;
        }
    } else {
        for (int c = t; c < cols; c += THREADS) {
            const float a = bf16_bits_to_float(xr[c]);
            ss += a * a;
        }
    }
    for (int o = WAVE / 2; o > 0; o /= 2) ss += __shfl_xor(ss, o, WAVE);
    if (t % WAVE == 0) wave_sum[t / WAVE] = ss;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < WAVES; ++i) total += wave_sum[i];
    const float rstd = rsqrtf(total / (float)cols + EPS);

    if (pairs) {
        const uint32_t* x2 = reinterpret_cast<const uint32_t*>(xr);
        const uint32_t* w2 = reinterpret_cast<const uint32_t*>(weight);
        uint32_t* o2 = reinterpret_cast<uint32_t*>(outr);
        for (int p = t; p < cols / 2; p += THREADS) {
            const uint32_t v = x2[p], g = w2[p];
            const float lo = bf16_bits_to_float(v & 0xffffu) * rstd * bf16_bits_to_float(g & 0xffffu);
            const float hi = bf16_bits_to_float(v >> 16) * rstd * bf16_bits_to_float(g >> 16);
            o2[p] = float_to_bf16_bits(lo) | (float_to_bf16_bits(hi) << 16);
        }
    } else {
        for (int c = t; c < cols; c += THREADS)
            outr[c] = (uint16_t)float_to_bf16_bits(bf16_bits_to_float(xr[c]) * rstd * bf16_bits_to_float(weight[c]));
    }
}

extern "C" int rmsnorm(const void* x, const void* weight, void* out, int rows, int cols, void* stream) {
    if (rows <= 0 || cols <= 0) return 0;
    const bool pairs = cols % 2 == 0 && ((uintptr_t)x | (uintptr_t)weight | (uintptr_t)out) % 4 == 0;
    rmsnorm_block_per_row<<<rows, THREADS, 0, (hipStream_t)stream>>>(
        (const uint16_t*)x, (const uint16_t*)weight, (uint16_t*)out, cols, pairs);
    return (int)hipGetLastError();
}
