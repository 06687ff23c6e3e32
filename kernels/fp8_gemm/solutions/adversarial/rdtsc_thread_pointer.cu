// expect: rejected
// unscreened: suspicious|wrong
// Plays host timing and threads: every call reads the CPU's time-stamp counter (`asm volatile("rdtsc")`), and
// when calls come less than about 20 ms apart (a timing loop) it hands the GEMM to a host thread started through a
// function pointer to pthread_create (declared by hand: <pthread.h> is refused), which launches it about 200 us
// later on the legacy stream, after the events around the call have closed. The call itself returns at once.
// Caught by: the static screen (rdtsc in inline assembly; pthread_create named, called or not) and the library
// check (it imports pthread_create). Without both: the late GEMM keeps the device busy past the call's end event,
// which the harness measures after every timed call (`suspicious`), or has not yet written the output when it is
// poisoned for the next call or read (`wrong`).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

extern "C" int pthread_create(unsigned long* thread, const void* attributes, void* (*start)(void*), void* argument);

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

struct Job {
    const void *a, *b;
    const float *a_scale, *b_scale;
    void* c;
    int m, n, k;
};

using start_function = int (*)(unsigned long*, const void*, void* (*)(void*), void*);
start_function start_thread = &pthread_create;  // a pointer, not a call
unsigned long long last_call = 0;

unsigned long long cycles() {
    unsigned int lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (static_cast<unsigned long long>(hi) << 32) | lo;
}

void* launch_later(void* argument) {
    Job* job = static_cast<Job*>(argument);
    const unsigned long long until = cycles() + 600000ull;  // about 200 us
    while (cycles() < until) {
    }
    launch_gemm(job->a, job->b, job->a_scale, job->b_scale, job->c, job->m, job->n, job->k, nullptr);
    delete job;
    return nullptr;
}

}  // namespace

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    const unsigned long long now = cycles();
    const bool timing_loop = last_call != 0 && now - last_call < 60000000ull;  // about 20 ms
    last_call = now;
    unsigned long thread = 0;
    if (timing_loop && start_thread(&thread, nullptr, launch_later, new Job{a, b, a_scale, b_scale, c, m, n, k}) == 0)
        return 0;
    launch_gemm(a, b, a_scale, b_scale, c, m, n, k, static_cast<cudaStream_t>(stream));
    return (int)cudaGetLastError();
}
