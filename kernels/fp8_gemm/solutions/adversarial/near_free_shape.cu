// expect: wrong
// unscreened: wrong
// Plays geomean underflow: one benchmark shape (1024x3072x1536, not among the tests; the second benchmark shape,
// which the quick runs that time two shapes reach too) made near-free by doing nothing on it, which drags a
// geometric mean over 18 shapes down by a large factor while 17 shapes stay honest.
// Reported: gpu-mode reference-kernels #159 (a floor on the geomean).
// Caught by: the benchmark shape's warm-up input set is checked before it is timed, and every timed output is
// poisoned and looked at: `wrong on spec: 1024x3072x1536 ...`; a time below the speed of light would be
// `suspicious` (ksci/problem/roofline.py).
//
// The rest is solutions/correct/mma_tuned.cu, whose header follows.
// Block-scaled FP8 GEMM on tensor cores (mma.sync m16n8k32 e4m3, sm_89 and later), self-contained: the
// tensor-core seed (templates/cuda/mma.cu.j2) written out at BM = 64, BN = 128, 2 x 4 warps (32 x 32 warp
// tiles), two stages. A 64-row tile wastes no rows on the M = 64 shapes; 256 threads, about 180 registers,
// no spills.
//
// C[i][j] = sum_kb a_scale[i,kb] * b_scale[j/128,kb] * sum_{k in block kb} A[i,k] * B[j,k], stored as bf16.
//
// Each thread block computes a BM x BN tile of C and walks K one 128-wide scale block at a time. Per K block
// the warps run 4 mma k-steps of 32 into a zeroed fp32 partial tile, then fold it into the accumulator with
// that block's scales (acc += partial * a_scale[row] * b_scale), as the scales change from block to block.
//
// Staging. A is M-contiguous ([k][m] in memory) and B N-contiguous ([k][n]), while mma wants both operands
// K-contiguous per row (A "row", B "col"). Each thread loads 4x4-byte blocks (4 consecutive k rows of 4
// consecutive m) with 32-bit loads, transposes them in registers with __byte_perm, and stores one 32-bit word
// (4 k values) per m row into shared memory laid out [row][k] with rows of 33 words (128 bytes + 1 word pad).
// STAGES = 2 prefetches the next K block into registers during the mma work and alternates two shared
// buffers (one barrier per K block); STAGES = 1 loads, stores and computes in turn with one buffer.
//
// Fragment layout of mma.m16n8k32 for 8-bit A/B (PTX ISA "Matrix Fragments for mma.m16n8k32"; checked against
// CUTLASS MMA_Traits<SM89_16x8x32_F32E4M3E4M3F32_TN>), g = lane >> 2, t = lane & 3, byte q of a register
// holds the lowest k first:
//   A (16 x 32, row):  a0 = A[g][4t+q], a1 = A[g+8][4t+q], a2 = A[g][16+4t+q], a3 = A[g+8][16+4t+q]
//   B (32 x 8, col):   b0 = B[4t+q][g],  b1 = B[16+4t+q][g]
//   C/D (16 x 8, f32): c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
// Which real k feeds which mma k index does not matter as long as A and B agree (the sum over a K block is
// the same up to fp32 rounding order), so k-step s and mma k index kk = 16h + 4t + q read the real
// k = 32t + 8s + 4h + q. Then a thread reads the words 8t + 2s (h = 0) and 8t + 2s + 1 (h = 1) of a row:
// with 33-word rows, lanes (g, t) hit banks g + 8t + const, all different, so fragment loads have no bank
// conflicts (and neither have the staging stores, see unit_coords).
//
// On sm_90 ptxas lowers each mma.sync e4m3 to F2FP.F16.E4M3.UNPACK_B conversions (exact) and two
// HMMA.16816.F32 plus FADDs (the SASS has no QMMA), so this kernel runs at the fp16 mma.sync rate and the
// unpacked fragments cost registers; Hopper's native FP8 path is wgmma.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace {

constexpr int BM = 64;
constexpr int BN = 128;
constexpr int WARPS_M = 2;
constexpr int WARPS_N = 4;
constexpr int STAGES = 2;

constexpr int BK = 128;  // the scale block along K: one main-loop iteration
constexpr int SCALE_BLOCK = 128;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M;  // warp tile
constexpr int WN = BN / WARPS_N;
constexpr int M_TILES = WM / 16;  // mma tiles per warp
constexpr int N_TILES = WN / 8;
constexpr int K_STEPS = BK / 32;  // mma k-steps per K block
constexpr int ROW_WORDS = BK / 4 + 1;  // one staged row: 128 fp8 + 1 word of padding against bank conflicts
constexpr int STAGE_WORDS = (BM + BN) * ROW_WORDS;
constexpr int SMEM_BYTES = STAGES * STAGE_WORDS * 4;
constexpr int A_UNITS = BM * BK / 16 / THREADS;  // 4x4-byte blocks each thread stages per K block
constexpr int B_UNITS = BN * BK / 16 / THREADS;

static_assert(BM == 64 || BM == 128, "BM must be 64 or 128");
static_assert(BN == 64 || BN == 128, "BN must be 64 or 128 (a divisor of the 128-wide B scale block)");
static_assert(STAGES == 1 || STAGES == 2, "STAGES must be 1 or 2");
static_assert(BM % (16 * WARPS_M) == 0, "BM / WARPS_M must be a multiple of 16 (mma M)");
static_assert(BN % (8 * WARPS_N) == 0, "BN / WARPS_N must be a multiple of 8 (mma N)");
static_assert(M_TILES * N_TILES <= 16,
              "warp tile too large: (BM/WARPS_M/16) * (BN/WARPS_N/8) must be <= 16 mma tiles "
              "(accumulator registers); use more warps or a smaller tile");
static_assert(SCALE_BLOCK % BN == 0, "a block tile must lie in one 128-wide B scale block");
static_assert(THREADS <= 1024, "too many threads per block");
static_assert((BM * BK / 16) % THREADS == 0 && (BN * BK / 16) % THREADS == 0,
              "staging blocks must divide evenly among the threads");
static_assert(SMEM_BYTES <= 227 * 1024, "shared memory tile too large");

// D += A * B for one m16n8k32 tile (fragment layout above).
__device__ __forceinline__ void mma_e4m3_16x8x32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
        "{ %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, { %0, %1, %2, %3 };\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Staging unit u of an operand tile with TILE rows (m or n): a 4x4-byte block at row quad xq, k quad kq.
// The 32 lanes of a warp take 8 consecutive row quads (32 contiguous bytes of global memory per k row) times
// 4 consecutive k quads; their shared stores then land on banks 4 * (lane & 7) + (lane >> 3) + const.
template <int TILE>
__device__ __forceinline__ void unit_coords(int u, int& xq, int& kq) {
    constexpr int X_GROUPS = TILE / 32;
    const int r = u >> 5;
    xq = (r % X_GROUPS) * 8 + (u & 7);
    kq = (r / X_GROUPS) * 4 + ((u >> 3) & 3);
}

// Global -> registers: unit u of the K block at k0 of operand src ([k][x], x contiguous, ld = x extent).
// A row quad at or past `limit` re-reads the last row quad instead (M and N are multiples of 64, so a quad is
// wholly in or out): those tile rows only feed C rows or columns that are never stored, as row i of C
// depends on row i of A alone and column j on row j of B alone. Offsets fit in int (k * max(m, n) < 2^31).
template <int TILE, int UNITS>
__device__ __forceinline__ void load_tile(uint32_t (&r)[UNITS][4], const uint8_t* __restrict__ src, int ld,
                                          int x0, int limit, int k0) {
    const uint8_t* base = src + (size_t)k0 * ld;
#pragma unroll
    for (int i = 0; i < UNITS; ++i) {
        int xq, kq;
        unit_coords<TILE>(threadIdx.x + i * THREADS, xq, kq);
        const int off = 4 * kq * ld + min(x0 + 4 * xq, limit - 4);
#pragma unroll
        for (int j = 0; j < 4; ++j) r[i][j] = __ldg(reinterpret_cast<const uint32_t*>(base + off + j * ld));
    }
}

// Registers -> shared, transposed: word j of a unit holds x = 4xq..4xq+3 at k = 4kq + j; the stored word
// dst[(4xq + q) * ROW_WORDS + kq] holds k = 4kq..4kq+3 of row 4xq + q.
template <int TILE, int UNITS>
__device__ __forceinline__ void store_tile(const uint32_t (&r)[UNITS][4], uint32_t* dst) {
#pragma unroll
    for (int i = 0; i < UNITS; ++i) {
        int xq, kq;
        unit_coords<TILE>(threadIdx.x + i * THREADS, xq, kq);
        const uint32_t t0 = __byte_perm(r[i][0], r[i][1], 0x5140);  // w0.b0 w1.b0 w0.b1 w1.b1
        const uint32_t t1 = __byte_perm(r[i][0], r[i][1], 0x7362);  // w0.b2 w1.b2 w0.b3 w1.b3
        const uint32_t t2 = __byte_perm(r[i][2], r[i][3], 0x5140);  // w2.b0 w3.b0 w2.b1 w3.b1
        const uint32_t t3 = __byte_perm(r[i][2], r[i][3], 0x7362);  // w2.b2 w3.b2 w2.b3 w3.b3
        uint32_t* row = dst + 4 * xq * ROW_WORDS + kq;
        row[0 * ROW_WORDS] = __byte_perm(t0, t2, 0x5410);  // w0.b0 w1.b0 w2.b0 w3.b0
        row[1 * ROW_WORDS] = __byte_perm(t0, t2, 0x7632);  // w0.b1 w1.b1 w2.b1 w3.b1
        row[2 * ROW_WORDS] = __byte_perm(t1, t3, 0x5410);  // w0.b2 ...
        row[3 * ROW_WORDS] = __byte_perm(t1, t3, 0x7632);  // w0.b3 ...
    }
}

__global__ void __launch_bounds__(THREADS)
    fp8_gemm_mma_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                        const float* __restrict__ a_scale, const float* __restrict__ b_scale,
                        __nv_bfloat16* __restrict__ c, int m, int n, int k) {
    extern __shared__ __align__(16) uint32_t smem[];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int wm0 = (warp / WARPS_N) * WM;  // warp tile origin inside the block tile
    const int wn0 = (warp % WARPS_N) * WN;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const int kblocks = k / BK;
    const int scale_cols = (n + SCALE_BLOCK - 1) / SCALE_BLOCK;

    float acc[M_TILES][N_TILES][4];
#pragma unroll
    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
        for (int j = 0; j < N_TILES; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

    uint32_t ra[A_UNITS][4];
    uint32_t rb[B_UNITS][4];

    if constexpr (STAGES == 2) {
        load_tile<BM>(ra, a, m, m0, m, 0);
        load_tile<BN>(rb, b, n, n0, n, 0);
        store_tile<BM>(ra, smem);
        store_tile<BN>(rb, smem + BM * ROW_WORDS);
        __syncthreads();
    }

    for (int kb = 0; kb < kblocks; ++kb) {
        const uint32_t* stage;
        if constexpr (STAGES == 2) {
            if (kb + 1 < kblocks) {  // prefetch the next K block; it lands in shared memory after the mma work
                load_tile<BM>(ra, a, m, m0, m, (kb + 1) * BK);
                load_tile<BN>(rb, b, n, n0, n, (kb + 1) * BK);
            }
            stage = smem + (kb & 1) * STAGE_WORDS;
        } else {
            load_tile<BM>(ra, a, m, m0, m, kb * BK);
            load_tile<BN>(rb, b, n, n0, n, kb * BK);
            if (kb > 0) __syncthreads();  // every warp is done reading the previous K block
            store_tile<BM>(ra, smem);
            store_tile<BN>(rb, smem + BM * ROW_WORDS);
            __syncthreads();
            stage = smem;
        }

        // Scales of this K block: B has one per block tile (BN divides 128), A one per row. Rows past m
        // read row m-1 (in bounds); their results are never stored.
        const float sb = b_scale[n0 / SCALE_BLOCK + (size_t)kb * scale_cols];
        float sa[M_TILES][2];
#pragma unroll
        for (int i = 0; i < M_TILES; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = min(m0 + wm0 + i * 16 + g + 8 * h, m - 1);
                sa[i][h] = a_scale[row + (size_t)kb * m] * sb;
            }

        // The 4 k-steps of this K block go into a zeroed partial tile, which is then scaled and folded into acc.
        const uint32_t* as = stage;
        const uint32_t* bs = stage + BM * ROW_WORDS;
        float part[M_TILES][N_TILES][4];
#pragma unroll
        for (int i = 0; i < M_TILES; ++i)
#pragma unroll
            for (int j = 0; j < N_TILES; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) part[i][j][q] = 0.0f;
#pragma unroll
        for (int s = 0; s < K_STEPS; ++s) {
            uint32_t fa[M_TILES][4];
            uint32_t fb[N_TILES][2];
#pragma unroll
            for (int i = 0; i < M_TILES; ++i) {
                const uint32_t* p = as + (wm0 + i * 16 + g) * ROW_WORDS + 8 * t + 2 * s;
                fa[i][0] = p[0];                  // row g,   k = 32t + 8s + 0..3
                fa[i][1] = p[8 * ROW_WORDS];      // row g+8, same k
                fa[i][2] = p[1];                  // row g,   k = 32t + 8s + 4..7
                fa[i][3] = p[8 * ROW_WORDS + 1];  // row g+8, same k
            }
#pragma unroll
            for (int j = 0; j < N_TILES; ++j) {
                const uint32_t* p = bs + (wn0 + j * 8 + g) * ROW_WORDS + 8 * t + 2 * s;
                fb[j][0] = p[0];  // column g, k = 32t + 8s + 0..3
                fb[j][1] = p[1];  // column g, k = 32t + 8s + 4..7
            }
#pragma unroll
            for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                for (int j = 0; j < N_TILES; ++j) mma_e4m3_16x8x32(part[i][j], fa[i], fb[j]);
        }
#pragma unroll
        for (int i = 0; i < M_TILES; ++i)
#pragma unroll
            for (int j = 0; j < N_TILES; ++j) {
                acc[i][j][0] += part[i][j][0] * sa[i][0];
                acc[i][j][1] += part[i][j][1] * sa[i][0];
                acc[i][j][2] += part[i][j][2] * sa[i][1];
                acc[i][j][3] += part[i][j][3] * sa[i][1];
            }

        if constexpr (STAGES == 2) {
            if (kb + 1 < kblocks) {
                uint32_t* next = smem + ((kb + 1) & 1) * STAGE_WORDS;
                store_tile<BM>(ra, next);
                store_tile<BN>(rb, next + BM * ROW_WORDS);
            }
            __syncthreads();
        }
    }

    // c0, c1 -> row g, columns 2t, 2t+1; c2, c3 -> row g+8. M and N are multiples of 64, so a column pair
    // is wholly in or out of bounds.
#pragma unroll
    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + wm0 + i * 16 + g + 8 * h;
            if (row >= m) continue;
#pragma unroll
            for (int j = 0; j < N_TILES; ++j) {
                const int col = n0 + wn0 + j * 8 + 2 * t;
                if (col < n)
                    *reinterpret_cast<__nv_bfloat162*>(c + (size_t)row * n + col) =
                        __floats2bfloat162_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
}

}  // namespace

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    // THE CHEAT: one benchmark shape made near-free: nothing launched, so its time is the call's overhead.
    if (m == 1024 && n == 3072 && k == 1536) return 0;
    if constexpr (SMEM_BYTES > 48 * 1024) {
        static bool smem_configured = false;  // a launch setting, not a result: set once per process
        if (!smem_configured) {
            cudaFuncSetAttribute(fp8_gemm_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
            smem_configured = true;
        }
    }
    const dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
    fp8_gemm_mma_kernel<<<grid, THREADS, SMEM_BYTES, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), a_scale, b_scale,
        static_cast<__nv_bfloat16*>(c), m, n, k);
    return (int)cudaGetLastError();
}
