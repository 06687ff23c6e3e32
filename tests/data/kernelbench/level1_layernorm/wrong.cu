// expect: wrong
// Forgets to subtract the mean in the output (x / sqrt(var + eps)): the inputs have mean 1, so off by about 1/3.
#include <cuda_runtime.h>

__global__ void layernorm_no_center(const float* x, float* out, int cols) {
    const float* row = x + (size_t)blockIdx.x * cols;
    if (threadIdx.x != 0) return;
    float s = 0.0f, q = 0.0f;
    for (int c = 0; c < cols; ++c) s += row[c];
    const float mean = s / cols;
    for (int c = 0; c < cols; ++c) q += (row[c] - mean) * (row[c] - mean);
    const float rstd = rsqrtf(q / cols + 1e-5f);
    for (int c = 0; c < cols; ++c) out[(size_t)blockIdx.x * cols + c] = row[c] * rstd;
}

extern "C" int level1_layernorm(const void* x, void* out, int batch_size, int features, void* stream) {
    layernorm_no_center<<<batch_size, 32, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, features);
    return (int)cudaGetLastError();
}
