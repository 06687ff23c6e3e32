// expect: wrong
// Plays the remembered-result cheat: the first call with a given (m, n, k) computes C and saves a copy in a
// static device buffer; later calls with the same shape copy the saved C back without computing, whatever
// the inputs. Right on the first call, wrong on every later call with new inputs.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

constexpr size_t SAVED_CAPACITY = size_t(1) << 22;  // bf16 elements (8 MiB): every test shape fits
__device__ __nv_bfloat16 saved_c[SAVED_CAPACITY];

__global__ void fp8_gemm_naive(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* a_scale,
                               const float* b_scale, __nv_bfloat16* c, int m, int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
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

__global__ void save_result(const __nv_bfloat16* c, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        saved_c[i] = c[i];
}

__global__ void replay_result(__nv_bfloat16* c, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        c[i] = saved_c[i];
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    static int saved_m = 0, saved_n = 0, saved_k = 0;  // the cheat: state kept between calls
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const size_t count = (size_t)m * n;
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(c);
    if (count <= SAVED_CAPACITY && m == saved_m && n == saved_n && k == saved_k) {
        replay_result<<<1024, 256, 0, s>>>(out, count);
        return (int)cudaGetLastError();
    }
    const dim3 block(32, 8);
    const dim3 grid((n + 31) / 32, (m + 7) / 8);
    fp8_gemm_naive<<<grid, block, 0, s>>>(static_cast<const __nv_fp8_e4m3*>(a),
                                          static_cast<const __nv_fp8_e4m3*>(b), a_scale, b_scale, out, m, n, k);
    if (count <= SAVED_CAPACITY) {
        save_result<<<1024, 256, 0, s>>>(out, count);
        saved_m = m;
        saved_n = n;
        saved_k = k;
    }
    return (int)cudaGetLastError();
}
