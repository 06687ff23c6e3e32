// expect: ok
// out = leaky_relu((x @ W^T + bias) * 2.0, 0.1): W is out_features x in_features (nn.Linear's weight), 16 x 16
// tiles through shared memory, the epilogue fused.
#include <cuda_runtime.h>

constexpr int TILE = 16;
constexpr float MULTIPLIER = 2.0f, NEGATIVE_SLOPE = 0.1f;

__global__ void gemm_epilogue(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                              float* __restrict__ out, int batch, int in_f, int out_f) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    const int wrow = blockIdx.x * TILE + threadIdx.y;  // the output feature this thread loads a weight of
    float acc = 0.0f;
    for (int k0 = 0; k0 < in_f; k0 += TILE) {
        const int k = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < batch && k < in_f) ? x[(size_t)row * in_f + k] : 0.0f;
        ws[threadIdx.y][threadIdx.x] = (wrow < out_f && k < in_f) ? w[(size_t)wrow * in_f + k] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
        __syncthreads();
    }
    if (row < batch && col < out_f) {
        const float y = (acc + bias[col]) * MULTIPLIER;
        out[(size_t)row * out_f + col] = y >= 0.0f ? y : y * NEGATIVE_SLOPE;
    }
}

extern "C" int level2_gemm_multiply_leakyrelu(const void* x, const void* gemm_weight, const void* gemm_bias, void* out,
                                              int batch_size, int in_features, int out_features, void* stream) {
    dim3 block(TILE, TILE), grid((out_features + TILE - 1) / TILE, (batch_size + TILE - 1) / TILE);
    gemm_epilogue<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)x, (const float*)gemm_weight,
                                                            (const float*)gemm_bias, (float*)out, batch_size,
                                                            in_features, out_features);
    return (int)cudaGetLastError();
}
