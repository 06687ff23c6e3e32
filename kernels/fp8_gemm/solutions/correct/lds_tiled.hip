// expect: ok
// Known-good HIP kernel, distinct from the seed templates: classic LDS-tiled GEMM on the vector ALUs
// (fp32 FMA, no matrix cores), so it runs on any AMD GPU. 64x64 tile per workgroup of 16x16 threads,
// each thread owning a 4x4 set of outputs; K in steps of 32, four steps per 128-wide scale block.
//
// Layouts (problem.yaml): A is M x K at a[i + k*M]; B is N x K at b[j + k*N]; a_scale[i + kb*M];
// b_scale[nb + kb*ceil(N/128)]; C is M x N bf16, row-major, c[i*N + j]. FP8 is e4m3fnuz (ROCm).
// The LDS tiles keep the global orientation (k-major, M or N contiguous): both operands are read
// along M/N in the inner loop, so no transpose is needed.
#include <hip/hip_runtime.h>
#include <stdint.h>

#define TILE 64      // output tile edge (M and N)
#define STEP_K 32    // K per LDS stage
#define SCALE_K 128  // scale block edge along K (and along N for B)
#define THREADS_X 16
#define THREADS_Y 16
#define PER_THREAD (TILE / THREADS_X)  // 4 outputs per thread along each of M and N

// e4m3fnuz -> fp32: bias 8, no infinities, no negative zero, 0x80 is NaN; exponent field 0 is
// subnormal (m * 2^-10), otherwise (8 + m) * 2^(e - 11). ldexpf of a small integer is exact.
__device__ __forceinline__ float decode_e4m3fnuz(uint8_t v) {
    if (v == 0x80) return __builtin_nanf("");
    const int e = (v >> 3) & 0xF;
    const int mant = v & 0x7;
    const float mag = (e == 0) ? ldexpf((float)mant, -10) : ldexpf((float)(8 + mant), e - 11);
    return (v & 0x80) ? -mag : mag;
}

// fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
__device__ __forceinline__ uint16_t bf16_bits_rne(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

__global__ __launch_bounds__(THREADS_X * THREADS_Y) void fp8_gemm_lds_tiled(
    const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, const float* __restrict__ a_scale,
    const float* __restrict__ b_scale, uint16_t* __restrict__ c, int m, int n, int k) {
    __shared__ float tile_a[STEP_K][TILE];  // tile_a[kk][ii] = A[m0 + ii][k0 + kk]
    __shared__ float tile_b[STEP_K][TILE];  // tile_b[kk][jj] = B[n0 + jj][k0 + kk]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * THREADS_X + tx;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    const int scale_n = (n + SCALE_K - 1) / SCALE_K;
    // This thread's outputs: rows m0 + ty + 16*r, columns n0 + tx + 16*s (r, s = 0..3).

    float acc[PER_THREAD][PER_THREAD] = {};
    float part[PER_THREAD][PER_THREAD];

    for (int k0 = 0; k0 < k; k0 += STEP_K) {
        if (k0 % SCALE_K == 0) {
            for (int r = 0; r < PER_THREAD; ++r)
                for (int s = 0; s < PER_THREAD; ++s) part[r][s] = 0.0f;
        }
        __syncthreads();  // previous stage fully read
        for (int idx = tid; idx < STEP_K * TILE; idx += THREADS_X * THREADS_Y) {
            const int kk = idx / TILE, rr = idx % TILE;  // consecutive threads: consecutive rows
            const size_t kcol = (size_t)(k0 + kk);
            tile_a[kk][rr] = (m0 + rr < m) ? decode_e4m3fnuz(a[(m0 + rr) + kcol * m]) : 0.0f;
            tile_b[kk][rr] = (n0 + rr < n) ? decode_e4m3fnuz(b[(n0 + rr) + kcol * n]) : 0.0f;
        }
        __syncthreads();  // stage complete
        for (int kk = 0; kk < STEP_K; ++kk) {
            float av[PER_THREAD], bv[PER_THREAD];
            for (int r = 0; r < PER_THREAD; ++r) av[r] = tile_a[kk][ty + THREADS_Y * r];
            for (int s = 0; s < PER_THREAD; ++s) bv[s] = tile_b[kk][tx + THREADS_X * s];
            for (int r = 0; r < PER_THREAD; ++r)
                for (int s = 0; s < PER_THREAD; ++s) part[r][s] = fmaf(av[r], bv[s], part[r][s]);
        }
        if ((k0 + STEP_K) % SCALE_K == 0) {  // end of scale block kb: apply its scales
            const int kb = k0 / SCALE_K;
            for (int r = 0; r < PER_THREAD; ++r) {
                const int row = m0 + ty + THREADS_Y * r;
                const float sa = (row < m) ? a_scale[row + (size_t)kb * m] : 0.0f;
                for (int s = 0; s < PER_THREAD; ++s) {
                    const int col = n0 + tx + THREADS_X * s;
                    const float sb = (col < n) ? b_scale[col / SCALE_K + (size_t)kb * scale_n] : 0.0f;
                    acc[r][s] = fmaf(part[r][s], sa * sb, acc[r][s]);
                }
            }
        }
    }

    for (int r = 0; r < PER_THREAD; ++r) {
        const int row = m0 + ty + THREADS_Y * r;
        for (int s = 0; s < PER_THREAD; ++s) {
            const int col = n0 + tx + THREADS_X * s;
            if (row < m && col < n) c[(size_t)row * n + col] = bf16_bits_rne(acc[r][s]);
        }
    }
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale,
                        void* c, int m, int n, int k, void* stream) {
    const dim3 block(THREADS_X, THREADS_Y);
    const dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    hipLaunchKernelGGL(fp8_gemm_lds_tiled, grid, block, 0, (hipStream_t)stream, (const uint8_t*)a,
                       (const uint8_t*)b, a_scale, b_scale, (uint16_t*)c, m, n, k);
    return (int)hipGetLastError();
}
