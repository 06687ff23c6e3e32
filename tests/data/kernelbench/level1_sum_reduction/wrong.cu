// expect: wrong
// The mean instead of the sum: divided by dim1.
#include <cuda_runtime.h>

__global__ void mean_dim1(const float* x, float* out, int batch, int dim1, int dim2) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
    if (j >= dim2) return;
    float acc = 0.0f;
    for (int i = 0; i < dim1; ++i) acc += x[((size_t)b * dim1 + i) * dim2 + j];
    out[(size_t)b * dim2 + j] = acc / dim1;
}

extern "C" int level1_sum_reduction(const void* x, void* out, int batch_size, int dim1, int dim2, int reduce_dim,
                                    void* stream) {
    dim3 block(256), grid((dim2 + 255) / 256, batch_size);
    mean_dim1<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, batch_size, dim1, dim2);
    return (int)cudaGetLastError();
}
