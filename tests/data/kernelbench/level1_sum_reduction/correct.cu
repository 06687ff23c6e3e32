// expect: ok
// out[b, 0, j] = sum over i of x[b, i, j] (reduce_dim = 1): one thread per (b, j), coalesced over j.
#include <cuda_runtime.h>

__global__ void sum_dim1(const float* __restrict__ x, float* __restrict__ out, int batch, int dim1, int dim2) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
    if (j >= dim2) return;
    const float* base = x + (size_t)b * dim1 * dim2 + j;
    float acc = 0.0f;
    for (int i = 0; i < dim1; ++i) acc += base[(size_t)i * dim2];
    out[(size_t)b * dim2 + j] = acc;
}

extern "C" int level1_sum_reduction(const void* x, void* out, int batch_size, int dim1, int dim2, int reduce_dim,
                                    void* stream) {
    if (reduce_dim != 1) return 1;  // this kernel reduces dim 1 only, as the problem does
    dim3 block(256), grid((dim2 + 255) / 256, batch_size);
    sum_dim1<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)x, (float*)out, batch_size, dim1, dim2);
    return (int)cudaGetLastError();
}
