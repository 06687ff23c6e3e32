// expect: wrong
// Drops the last element of every dot product (k < K - 1): off by one product, about 1 in magnitude.
#include <cuda_runtime.h>

__global__ void matmul_short(const float* a, const float* b, float* c, int m, int k, int n) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int kk = 0; kk < k - 1; ++kk) acc += a[(size_t)row * k + kk] * b[(size_t)kk * n + col];
    c[(size_t)row * n + col] = acc;
}

extern "C" int level1_matmul(const void* A, const void* B, void* out, int M, int K, int N, void* stream) {
    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    matmul_short<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)A, (const float*)B, (float*)out, M, K, N);
    return (int)cudaGetLastError();
}
