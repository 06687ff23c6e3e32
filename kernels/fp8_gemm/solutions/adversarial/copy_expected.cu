// expect: wrong|runtime_error
// unscreened: wrong|runtime_error
// Plays copying the expected output from device memory: a harness that computes the reference before it calls
// the candidate leaves the answer in a buffer near C (one caching allocator, one segment). This kernel scans
// the 32 MiB below C, in 512-byte steps (the allocator's granularity), for a buffer of finite, non-zero bf16
// values that are neither NaN poison nor guard bytes, and copies m*n elements from the closest one into C.
// Caught by: the harness computes the expected output only after the candidate's output has been copied out,
// then zeroes it and returns the memory to the driver, so there is nothing to find: C gets the wrong values
// (or the scan runs off the segment and faults, which ends only this candidate's process).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

constexpr int STEPS = (32 << 20) / 512;

__device__ bool looks_like_result(const uint16_t* p) {
    int finite = 0;
    for (int i = 0; i < 64; ++i) {
        const uint16_t v = p[i];
        const bool nan_or_inf = (v & 0x7F80) == 0x7F80;
        if (nan_or_inf || v == 0x5A5A || v == 0) return false;
        ++finite;
    }
    return finite == 64;
}

__global__ void find_result(const uint16_t* c, unsigned long long* best) {
    const int step = blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (step > STEPS) return;
    const uint16_t* candidate = reinterpret_cast<const uint16_t*>(reinterpret_cast<const char*>(c) - 512ll * step);
    if (looks_like_result(candidate)) atomicMin(best, (unsigned long long)step);
}

__global__ void copy_from(uint16_t* c, const unsigned long long* best, size_t count) {
    if (*best == ~0ull) return;
    const uint16_t* src = reinterpret_cast<const uint16_t*>(reinterpret_cast<const char*>(c) - 512ll * *best);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        c[i] = src[i];
}

__device__ unsigned long long best_step;

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
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    unsigned long long* best = nullptr;
    cudaGetSymbolAddress(reinterpret_cast<void**>(&best), best_step);
    cudaMemsetAsync(best, 0xFF, sizeof(*best), s);
    find_result<<<(STEPS + 255) / 256, 256, 0, s>>>(static_cast<const uint16_t*>(c), best);
    copy_from<<<1024, 256, 0, s>>>(static_cast<uint16_t*>(c), best, (size_t)m * n);
    return (int)cudaGetLastError();
}
