// expect: ok
// (x - mean) / sqrt(var + 1e-5) over the last dim, biased variance: one block per row, two passes.
#include <cuda_runtime.h>

constexpr int THREADS = 256;

__device__ float block_sum(float v, float* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    const float total = shared[0];
    __syncthreads();
    return total;
}

__global__ void layernorm_rows(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float shared[THREADS];
    const float* row = x + (size_t)blockIdx.x * cols;
    float* dst = out + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += row[c];
    const float mean = block_sum(s, shared) / cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) q += (row[c] - mean) * (row[c] - mean);
    const float rstd = rsqrtf(block_sum(q, shared) / cols + 1e-5f);
    for (int c = threadIdx.x; c < cols; c += THREADS) dst[c] = (row[c] - mean) * rstd;
}

extern "C" int level1_layernorm(const void* x, void* out, int batch_size, int features, void* stream) {
    layernorm_rows<<<batch_size, THREADS, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, features);
    return (int)cudaGetLastError();
}
