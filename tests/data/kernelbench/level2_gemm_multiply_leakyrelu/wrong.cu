// expect: wrong
// Leaves out the bias (nn.Linear's bias is drawn uniform in +-1/sqrt(in_features): a visible shift).
#include <cuda_runtime.h>

__global__ void gemm_no_bias(const float* x, const float* w, float* out, int batch, int in_f, int out_f) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= batch || col >= out_f) return;
    float acc = 0.0f;
    for (int k = 0; k < in_f; ++k) acc += x[(size_t)row * in_f + k] * w[(size_t)col * in_f + k];
    const float y = acc * 2.0f;
    out[(size_t)row * out_f + col] = y >= 0.0f ? y : 0.1f * y;
}

extern "C" int level2_gemm_multiply_leakyrelu(const void* x, const void* gemm_weight, const void* gemm_bias, void* out,
                                              int batch_size, int in_features, int out_features, void* stream) {
    dim3 block(16, 16), grid((out_features + 15) / 16, (batch_size + 15) / 16);
    gemm_no_bias<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)x, (const float*)gemm_weight, (float*)out,
                                                           batch_size, in_features, out_features);
    return (int)cudaGetLastError();
}
