// expect: ok
// x * sigmoid(x), element-wise, a grid-stride loop.
#include <cuda_runtime.h>

__global__ void swish(const float* __restrict__ x, float* __restrict__ out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        out[i] = v / (1.0f + expf(-v));
    }
}

extern "C" int level1_swish(const void* x, void* out, int batch_size, int dim, void* stream) {
    const size_t n = (size_t)batch_size * dim;
    const int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    swish<<<blocks, 256, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, n);
    return (int)cudaGetLastError();
}
