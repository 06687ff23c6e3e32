// expect: rejected
// Plays a candidate that compiles and links as a shared library but cannot be loaded: it calls a helper that
// is declared (as if from a header) and defined nowhere, so dlopen with RTLD_NOW would fail with "undefined
// symbol: ksci_pick_tile_config". The library check (ksci/evaluate/screen/library.py) sees the import first and names it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" int ksci_pick_tile_config(int m, int n, int k);  // never defined

__global__ void fill_zero(__nv_bfloat16* c, size_t count) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) c[i] = __float2bfloat16_rn(0.0f);
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    (void)a; (void)b; (void)a_scale; (void)b_scale;
    const int threads = ksci_pick_tile_config(m, n, k);
    const size_t count = (size_t)m * n;
    fill_zero<<<(unsigned)((count + threads - 1) / threads), threads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<__nv_bfloat16*>(c), count);
    return (int)cudaGetLastError();
}
