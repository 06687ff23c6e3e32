// expect: runtime_error
// Plays a kernel that runs the device out of memory: it asks cudaMalloc for 1 TiB of workspace on every call
// and returns the runtime's error code (cudaErrorMemoryAllocation) when that fails, as it must. The harness
// reports a runtime_error, and the next candidate, in a fresh process, starts with all the memory free.
#include <cuda_runtime.h>

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    (void)a; (void)b; (void)a_scale; (void)b_scale; (void)c; (void)m; (void)n; (void)k; (void)stream;
    void* workspace = nullptr;
    const cudaError_t status = cudaMalloc(&workspace, size_t(1) << 40);
    if (status != cudaSuccess) return (int)status;
    cudaFree(workspace);
    return 0;
}
