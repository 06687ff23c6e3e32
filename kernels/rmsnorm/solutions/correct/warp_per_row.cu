// expect: ok
// One warp per row, rows taken in a grid-stride loop (so the grid is capped), 16-byte vectors when
// cols % 8 == 0 and the pointers are aligned, scalar otherwise. Written apart from the seed templates.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int WARPS_PER_BLOCK = 8;
constexpr int THREADS = WARPS_PER_BLOCK * 32;
constexpr int MAX_BLOCKS = 4096;
constexpr float EPS = 1e-6f;

__device__ __forceinline__ float bf16_bits_to_float(uint32_t h) { return __uint_as_float(h << 16); }

__device__ __forceinline__ uint32_t float_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x0040u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

__global__ void __launch_bounds__(THREADS)
rmsnorm_warp_per_row(const uint16_t* __restrict__ x, const uint16_t* __restrict__ weight,
                     uint16_t* __restrict__ out, int rows, int cols, bool vectorized) {
    const int lane = threadIdx.x % 32;
    const int first = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int stride = gridDim.x * WARPS_PER_BLOCK;
    // The loop bound is the same for all lanes of a warp, so the full-mask shuffles below are safe.
    for (int row = first; row < rows; row += stride) {
        const uint16_t* xr = x + (size_t)row * cols;
        uint16_t* outr = out + (size_t)row * cols;
        float ss = 0.0f;
        if (vectorized) {
            for (int c = lane * 8; c < cols; c += 32 * 8) {
                const uint4 v = *reinterpret_cast<const uint4*>(xr + c);
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                for (int i = 0; i < 4; ++i) {
                    const float a = bf16_bits_to_float(w[i] & 0xffffu), b = bf16_bits_to_float(w[i] >> 16);
                    ss += a * a + b * b;
                }
            }
        } else {
            for (int c = lane; c < cols; c += 32) {
                const float a = bf16_bits_to_float(xr[c]);
                ss += a * a;
            }
        }
        for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const float rstd = rsqrtf(ss / (float)cols + EPS);

        if (vectorized) {
            for (int c = lane * 8; c < cols; c += 32 * 8) {
                const uint4 v = *reinterpret_cast<const uint4*>(xr + c);
                const uint4 g = *reinterpret_cast<const uint4*>(weight + c);
                const uint32_t w[4] = {v.x, v.y, v.z, v.w}, k[4] = {g.x, g.y, g.z, g.w};
                uint32_t o[4];
                for (int i = 0; i < 4; ++i) {
                    const float lo = bf16_bits_to_float(w[i] & 0xffffu) * rstd * bf16_bits_to_float(k[i] & 0xffffu);
                    const float hi = bf16_bits_to_float(w[i] >> 16) * rstd * bf16_bits_to_float(k[i] >> 16);
                    o[i] = float_to_bf16_bits(lo) | (float_to_bf16_bits(hi) << 16);
                }
                *reinterpret_cast<uint4*>(outr + c) = make_uint4(o[0], o[1], o[2], o[3]);
            }
        } else {
            for (int c = lane; c < cols; c += 32)
                outr[c] = (uint16_t)float_to_bf16_bits(bf16_bits_to_float(xr[c]) * rstd *
                                                       bf16_bits_to_float(weight[c]));
        }
    }
}

extern "C" int rmsnorm(const void* x, const void* weight, void* out, int rows, int cols, void* stream) {
    if (rows <= 0 || cols <= 0) return 0;
    const bool vectorized = cols % 8 == 0 && ((uintptr_t)x | (uintptr_t)weight | (uintptr_t)out) % 16 == 0;
    int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    rmsnorm_warp_per_row<<<blocks, THREADS, 0, (cudaStream_t)stream>>>(
        (const uint16_t*)x, (const uint16_t*)weight, (uint16_t*)out, rows, cols, vectorized);
    return (int)cudaGetLastError();
}
