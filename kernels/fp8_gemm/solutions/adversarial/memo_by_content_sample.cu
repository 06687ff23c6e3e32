// expect: wrong
// unscreened: wrong
// Plays results replayed by a small sample of the inputs' content: on the device, a key made of three sign bits of
// A (the bytes at three fixed positions) picks one of eight remembered outputs per shape, kept in a cudaMalloc'd
// cache; when that key has been seen, the GEMM's blocks return at once and the remembered C is copied instead. All
// on the device, so the host never waits. Where the same few input sets are timed over and over (the harness
// before issue 20), every timed call after the first on a set is a copy: as fast as cuBLASLt.
// Caught by: every timed call gets input values of its own and a NaN-poisoned output, and the outputs of timed
// calls are checked (a random sample of each batch in full, every one for poison). Once the eight keys are taken,
// a call with new inputs meets a key remembered from other inputs and replays their output, which the check finds
// wrong. (A key fine enough never to collide would never replay: it would be timed doing the whole GEMM, honestly.)
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

constexpr int SLOTS = 8;  // three sign bits
constexpr int MAX_SHAPES = 32;

// The remembered outputs of one shape: state[0] = this call's key, state[1] = hit, state[2 + key] = slot filled.
struct Slots {
    __nv_bfloat16* out[SLOTS];
};
struct Memo {
    int m, n, k;
    int* state;
    Slots slots;
};
Memo memos[MAX_SHAPES];
int memo_count = 0;

__global__ void probe(const uint8_t* a, size_t a_bytes, int* state) {
    int key = 0;
    for (int i = 0; i < 3; ++i) key |= ((a[a_bytes / 4 * (i + 1)] >> 7) & 1) << i;
    state[0] = key;
    state[1] = state[2 + key];
}

// A hit copies the remembered output into C; a miss remembers the C that the GEMM just wrote.
__global__ void replay_or_remember(int* state, __nv_bfloat16* c, Slots slots, size_t count) {
    const int key = state[0];
    const bool hit = state[1] != 0;
    __nv_bfloat16* saved = slots.out[key];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        if (hit) c[i] = saved[i];
        else saved[i] = c[i];
    }
}

__global__ void mark_filled(int* state) { state[2 + state[0]] = 1; }

Memo* memo_for(int m, int n, int k, cudaStream_t stream) {
    for (int i = 0; i < memo_count; ++i)
        if (memos[i].m == m && memos[i].n == n && memos[i].k == k) return &memos[i];
    if (memo_count == MAX_SHAPES) return nullptr;
    Memo* memo = &memos[memo_count];
    if (cudaMalloc(&memo->state, sizeof(int) * (2 + SLOTS)) != cudaSuccess) return nullptr;
    cudaMemsetAsync(memo->state, 0, sizeof(int) * (2 + SLOTS), stream);
    for (int s = 0; s < SLOTS; ++s)
        if (cudaMalloc(&memo->slots.out[s], sizeof(__nv_bfloat16) * (size_t)m * n) != cudaSuccess) return nullptr;
    memo->m = m, memo->n = n, memo->k = k;
    ++memo_count;
    return memo;
}

}  // namespace

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    Memo* memo = memo_for(m, n, k, s);
    if (memo == nullptr) {  // no room: honest
        launch_gemm(a, b, a_scale, b_scale, c, m, n, k, s);
        return (int)cudaGetLastError();
    }
    probe<<<1, 1, 0, s>>>(static_cast<const uint8_t*>(a), (size_t)m * k, memo->state);
    launch_gemm(a, b, a_scale, b_scale, c, m, n, k, s, memo->state + 1);
    replay_or_remember<<<1024, 256, 0, s>>>(memo->state, static_cast<__nv_bfloat16*>(c), memo->slots, (size_t)m * n);
    mark_filled<<<1, 1, 0, s>>>(memo->state);
    return (int)cudaGetLastError();
}
