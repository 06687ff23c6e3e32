// expect: runtime_error
// Plays a kernel that writes through a bad pointer: the output pointer handed to the kernel is the address
// 0x100 (unmapped on the device), so the kernel faults with an illegal address (cudaErrorIllegalAddress,
// reported at the next synchronisation, not by the launch). The fault leaves the CUDA context unusable, so
// the harness must run candidates in a process it can throw away.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void write_everywhere(__nv_bfloat16* c, size_t count) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) c[i] = __float2bfloat16_rn(1.0f);
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    (void)a; (void)b; (void)a_scale; (void)b_scale; (void)c; (void)k;
    __nv_bfloat16* bad = reinterpret_cast<__nv_bfloat16*>(uintptr_t(0x100));  // not c
    const size_t count = (size_t)m * n;
    write_everywhere<<<(unsigned)((count + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(bad, count);
    return (int)cudaGetLastError();
}
