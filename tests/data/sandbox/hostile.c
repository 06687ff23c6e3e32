/* Host code a kernel could carry, making its system calls with the raw instruction written as bytes
 * (`.byte 0x0f, 0x05`: neither the static screen nor the library check sees a call). The same four attacks as the
 * CUDA kernels kernels/fp8_gemm/solutions/adversarial/sandbox_*.cu, for the CPU tests of the sandbox
 * (tests/test_sandbox_privileges.py): built as a program (run in the compiler's sandbox) and as a shared library
 * (loaded in the harness child's). x86_64 only. Each function returns 0 when its attack succeeded, else the errno
 * of the call that failed. */
#include <stddef.h>

#define NR_write 1
#define NR_close 3
#define NR_socket 41
#define NR_connect 42
#define NR_ptrace 101
#define NR_getppid 110
#define NR_mount 165
#define NR_openat 257
#define NR_unshare 272
#define AT_FDCWD (-100)
#define CREATE_FLAGS 01101 /* O_WRONLY | O_CREAT | O_TRUNC */
#define MS_REMOUNT_BIND (32 | 4096)
#define CLONE_NEWUSER_NS (0x10000000 | 0x00020000)

static long raw(long n, long a, long b, long c, long d, long e) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile(".byte 0x0f, 0x05"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

static int write_file(const char* file) {
    long fd = raw(NR_openat, AT_FDCWD, (long)file, CREATE_FLAGS, 0644, 0);
    if (fd < 0) return (int)-fd;
    raw(NR_write, fd, (long)"written from inside the sandbox\n", 32, 0, 0);
    raw(NR_close, fd, 0, 0, 0, 0);
    return 0;
}

/* (1) Make a read-only folder writable again, then write into it. */
int remount_and_write(const char* folder, const char* file) {
    long made = raw(NR_mount, 0, (long)folder, 0, MS_REMOUNT_BIND, 0);
    if (made < 0) return (int)-made;
    return write_file(file);
}

/* (2) Write a file outside the work folder; where that is refused, try to leave the sandbox's namespaces (a new
 * user namespace gives every capability back) and write again. */
int raw_write(const char* file) {
    if (write_file(file) == 0) return 0;
    long left = raw(NR_unshare, CLONE_NEWUSER_NS, 0, 0, 0, 0);
    if (left < 0) return (int)-left;
    return write_file(file);
}

/* (3) Reach a TCP port of the host's loopback. */
int connect_inet(int port) {
    long fd = raw(NR_socket, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0, 0, 0);
    if (fd < 0) return (int)-fd;
    unsigned char address[16] = {2, 0, (unsigned char)(port >> 8), (unsigned char)port, 127, 0, 0, 1};
    long done = raw(NR_connect, fd, (long)address, sizeof address, 0, 0);
    raw(NR_close, fd, 0, 0, 0, 0);
    return done < 0 ? (int)-done : 0;
}

/* (4) Attach to the parent process, to read or change its memory (its timings, its keys). */
int ptrace_parent(void) {
    long parent = raw(NR_getppid, 0, 0, 0, 0, 0);
    long done = raw(NR_ptrace, 16 /* PTRACE_ATTACH */, parent, 0, 0, 0);
    return done < 0 ? (int)-done : 0;
}

/* The program: hostile ATTACK ARG..., exit status 0 when the attack succeeded, else the errno that stopped it. */
int main(int argc, char** argv) {
    if (argc >= 4 && argv[1][0] == 'r' && argv[1][1] == 'e') return remount_and_write(argv[2], argv[3]);
    if (argc >= 3 && argv[1][0] == 'w') return raw_write(argv[2]);
    if (argc >= 3 && argv[1][0] == 'c') {
        int port = 0;
        for (const char* p = argv[2]; *p; ++p) port = port * 10 + (*p - '0');
        return connect_inet(port);
    }
    if (argc >= 2 && argv[1][0] == 'p') return ptrace_parent();
    return 125;
}
