// expect: rejected
// unscreened: ok
// Plays a host-side look at whether the GPU has caught up: a word of pinned host memory mapped into the device's
// address space (cudaHostAlloc with cudaHostAllocMapped) that a one-thread kernel after each GEMM sets to the
// call's sequence number. A call that finds the previous call's GEMM still running (calls back to back, as in a
// batch of timed calls on one input set) with the same pointers launches nothing and returns, trusting the work in
// flight to leave the answer in C; the events around it see an empty call.
// Caught by: the static screen (pinned, mapped host memory) and the library check (it imports cudaHostAlloc and
// cudaHostGetDevicePointer, outside the allowlist). Without both it is harmless: the harness times one call at a
// time and waits for the whole device to be idle after each, so the word has always caught up, no call is skipped
// and every call is timed doing the whole GEMM.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

// The honest part: solutions/correct/smem_tiled.cu (64 x 64 tiles of C in shared memory), with a flag that lets
// the cheat skip it.
namespace {

constexpr int TILE = 64;         // C tile edge (M and N are multiples of 64, rows and columns are guarded anyway)
constexpr int SLICE = 32;        // K values staged per shared-memory round
constexpr int SCALE_BLOCK = 128;  // scale block edge along K (A and B) and along N (B)
constexpr int THREADS = 256;     // 16 x 16
constexpr int WORDS = SLICE * TILE / 4;  // 32-bit words of one operand slice

__device__ __forceinline__ float4 decode_e4m3x4(uint32_t w) {
    float f[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        __nv_fp8_e4m3 v;
        v.__x = static_cast<__nv_fp8_storage_t>((w >> (8 * q)) & 0xffu);
        f[q] = static_cast<float>(v);
    }
    return make_float4(f[0], f[1], f[2], f[3]);
}

// One slice of an operand ([k][x], x contiguous, ld = x extent) into dst[SLICE][TILE] as floats.
// Quads past `limit` read as zero (a quad is wholly in or out: the extents are multiples of 4).
__device__ __forceinline__ void stage_slice(float (*dst)[TILE], const uint8_t* __restrict__ src, int ld, int x0,
                                            int limit, int k0) {
#pragma unroll
    for (int w = threadIdx.x; w < WORDS; w += THREADS) {
        const int row = w / (TILE / 4);
        const int x = 4 * (w % (TILE / 4));
        uint32_t word = 0;
        if (x0 + x < limit) word = *reinterpret_cast<const uint32_t*>(src + (size_t)(k0 + row) * ld + x0 + x);
        *reinterpret_cast<float4*>(&dst[row][x]) = decode_e4m3x4(word);
    }
}

__global__ void __launch_bounds__(THREADS)
    gemm_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, const float* __restrict__ a_scale,
                const float* __restrict__ b_scale, __nv_bfloat16* __restrict__ c, int m, int n, int k,
                const int* skip) {
    if (skip != nullptr && *skip) return;  // the cheat decided (on the device) that this call needs no work

    __shared__ __align__(16) float as[SLICE][TILE];
    __shared__ __align__(16) float bs[SLICE][TILE];

    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    const int m0 = blockIdx.y * TILE;
    const int n0 = blockIdx.x * TILE;
    const int scale_cols = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;

    float acc[4][4] = {};
    for (int kb = 0; kb < k / SCALE_BLOCK; ++kb) {
        float part[4][4] = {};
        for (int ks = 0; ks < SCALE_BLOCK; ks += SLICE) {
            __syncthreads();  // the previous slice has been read by every thread
            stage_slice(as, a, m, m0, m, kb * SCALE_BLOCK + ks);
            stage_slice(bs, b, n, n0, n, kb * SCALE_BLOCK + ks);
            __syncthreads();
#pragma unroll 8
            for (int kk = 0; kk < SLICE; ++kk) {
                float av[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) part[i][j] = fmaf(av[i], bv[j], part[i][j]);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int row = min(m0 + ty + 16 * i, m - 1);  // rows past m are computed but never stored
            const float sa = a_scale[row + (size_t)kb * m];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int col = min(n0 + tx + 16 * j, n - 1);
                acc[i][j] += part[i][j] * sa * b_scale[col / SCALE_BLOCK + (size_t)kb * scale_cols];
            }
        }
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int row = m0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = n0 + tx + 16 * j;
            if (row < m && col < n) c[(size_t)row * n + col] = __float2bfloat16_rn(acc[i][j]);
        }
    }
}

// The whole GEMM on `stream`; its blocks return at once when *skip is non-zero.
void launch_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m, int n,
                 int k, cudaStream_t stream, const int* skip = nullptr) {
    const dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    gemm_kernel<<<grid, THREADS, 0, stream>>>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), a_scale,
                                              b_scale, static_cast<__nv_bfloat16*>(c), m, n, k, skip);
}

volatile int* done_host = nullptr;  // mapped: the device writes it, the host reads it without synchronising
int* done_device = nullptr;
int issued = 0;
const void* last_c = nullptr;
const void* last_a = nullptr;

__global__ void signal_done(int* done, int sequence) {
    *done = sequence;
    __threadfence_system();
}

}  // namespace

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (done_host == nullptr) {
        int* mapped = nullptr;
        if (cudaHostAlloc(reinterpret_cast<void**>(&mapped), sizeof(int), cudaHostAllocMapped) != cudaSuccess) return 1;
        if (cudaHostGetDevicePointer(reinterpret_cast<void**>(&done_device), mapped, 0) != cudaSuccess) return 1;
        *mapped = 0;
        done_host = mapped;
    }
    const bool in_flight = *done_host != issued;
    if (in_flight && a == last_a && c == last_c) return 0;  // the previous call's GEMM will leave the answer
    last_a = a, last_c = c;
    launch_gemm(a, b, a_scale, b_scale, c, m, n, k, s);
    signal_done<<<1, 1, 0, s>>>(done_device, ++issued);
    return (int)cudaGetLastError();
}
