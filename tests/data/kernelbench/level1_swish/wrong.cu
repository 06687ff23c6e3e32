// expect: wrong
// The sigmoid's sign flipped: x * sigmoid(-x).
#include <cuda_runtime.h>

__global__ void swish_flipped(const float* x, float* out, size_t n) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] / (1.0f + expf(x[i]));
}

extern "C" int level1_swish(const void* x, void* out, int batch_size, int dim, void* stream) {
    const size_t n = (size_t)batch_size * dim;
    swish_flipped<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, n);
    return (int)cudaGetLastError();
}
