// expect: compile_error
// Plays a candidate that does not compile: a missing semicolon and an undeclared name.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void fp8_gemm_kernel(__nv_bfloat16* c, int m, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < m * n) c[i] = __float2bfloat16_rn(undeclared_value);
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    fp8_gemm_kernel<<<(m * n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<__nv_bfloat16*>(c), m, n);
    return (int)cudaGetLastError();
}
