// expect: timeout
// Plays a kernel that never finishes: every thread spins on a device flag that nothing ever sets. The read is
// volatile, so the compiler must keep the loop; the launch itself succeeds and returns 0.
#include <cuda_runtime.h>

__device__ int never_set = 0;

__global__ void spin_forever(int* out) {
    while (*static_cast<volatile int*>(&never_set) == 0) {
    }
    *out = 1;  // unreachable; gives the loop an observable purpose
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    (void)a; (void)b; (void)a_scale; (void)b_scale; (void)m; (void)n; (void)k;
    spin_forever<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<int*>(c));
    return (int)cudaGetLastError();
}
