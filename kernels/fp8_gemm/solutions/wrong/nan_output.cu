// expect: wrong
// Plays a kernel that computes nothing and fills C with NaN (a NaN must never pass a tolerance check).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void fill_nan(__nv_bfloat16* c, size_t count) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) c[i] = __ushort_as_bfloat16(0x7FC0);  // quiet NaN
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    (void)a; (void)b; (void)a_scale; (void)b_scale; (void)k;
    const size_t count = (size_t)m * n;
    fill_nan<<<(unsigned)((count + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<__nv_bfloat16*>(c), count);
    return (int)cudaGetLastError();
}
