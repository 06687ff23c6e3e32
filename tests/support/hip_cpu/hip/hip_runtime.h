// A CPU emulator of the part of HIP that ksci's HIP templates use, for tests only (tests/test_hip_emulated.py).
// No AMD GPU is reachable from this project; with this header a template's kernel runs on the host, every thread
// of a workgroup a fiber (ucontext), so that the templates' indexing, staging, swizzles, scales and epilogue are
// checked against the problem's reference. What it does not model: timing, memory ordering beyond __syncthreads,
// the hardware's rounding inside an MFMA (it sums each product in double and rounds once), anything not below.
//
// - Workgroups run one after the other; __shared__ variables are function statics (one workgroup's LDS at a time).
// - A workgroup's threads are fibers on the calling thread, resumed in turn (thread 0, 1, ...); a fiber gives way
//   only at a barrier. So a launch uses one core, and a barrier costs a context switch in user space per thread
//   rather than a wake-up of hundreds of kernel threads.
// - __syncthreads is a barrier of the workgroup's threads.
// - __shfl_xor is wave-wide too: each lane deposits its value, a barrier, each reads its partner's.
// - The MFMA (KSCI_EMULATE_MFMA, called by the templates' host path) is wave-wide: every lane of a wave deposits
//   its operands, a barrier of the wave's 64 threads, then each lane computes its own result elements from all the
//   lanes' operands, and a second barrier before the slots are reused. Where each element of A, B and D lives
//   (lane, register, byte) comes from AMD's Matrix Instruction Calculator (tests/data/mfma_layouts.json), written
//   into KSCI_MFMA_LAYOUTS (a header the test generates) as the tables below read them.
// - A barrier that can never fill (every live thread waits, some at another barrier or already returned) aborts the
//   process with a message, where a GPU would hang.
// - Atomics and __threadfence are the host's (sequentially consistent); hipMalloc is malloc.
// - FP8 is e4m3fnuz (bias 8, 0x80 the only NaN, no infinities), what the CDNA3 fp8 MFMA reads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef int hipError_t;
constexpr hipError_t hipSuccess = 0;
typedef struct ihipStream_t* hipStream_t;

namespace ksci_hip {

constexpr int WAVE = 64;

struct WaveSlots {
    int64_t a[WAVE], b[WAVE];
    float c[WAVE][16];
    uint64_t shuffled[WAVE];
};

// The fibers of the running workgroup: which one runs, and the scheduler's context it gives way to.
struct Fibers {
    ucontext_t scheduler;
    std::vector<ucontext_t> contexts;
    std::vector<char> finished;
    int current = 0;
    long waits = 0;  // fibers that gave way since a thread last arrived at a barrier or returned
};
inline Fibers* fibers;

// Give way to the scheduler, which resumes the next live fiber.
inline void yield() { swapcontext(&fibers->contexts[fibers->current], &fibers->scheduler); }

// A barrier of `expected` fibers: the last to arrive opens it; the others give way until it has opened.
struct Barrier {
    explicit Barrier(int expected_) : expected(expected_) {}
    int expected, arrived = 0;
    long phase = 0;
    void arrive_and_wait() {
        const long mine = phase;
        fibers->waits = 0;
        if (++arrived == expected) {
            arrived = 0;
            ++phase;
            return;
        }
        while (phase == mine) {
            if (++fibers->waits > 4L * (long)fibers->contexts.size() + 16) {
                std::fprintf(stderr, "hip emulator: a barrier of %d threads can never fill (%d arrived)\n",
                             expected, arrived);
                std::abort();
            }
            yield();
        }
    }
};

struct Workgroup {
    explicit Workgroup(int threads) : block(threads), slots((threads + WAVE - 1) / WAVE) {
        for (int w = 0; w < (threads + WAVE - 1) / WAVE; ++w)
            waves.push_back(std::make_unique<Barrier>(std::min(WAVE, threads - w * WAVE)));
    }
    Barrier block;
    std::vector<std::unique_ptr<Barrier>> waves;
    std::vector<WaveSlots> slots;
};

inline dim3 thread_idx, block_idx;
inline int linear_tid;
inline Workgroup* workgroup;
inline dim3 block_dim, grid_dim;
inline std::function<void()> fiber_body;  // the running launch's kernel call, as each fiber starts it

inline void fiber_main() {
    fiber_body();
    fibers->finished[fibers->current] = 1;
    fibers->waits = 0;
}

constexpr size_t FIBER_STACK = 256 * 1024;  // malloc'd, so only the pages a thread touches are backed

template <class Kernel, class... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, Args... args) {
    block_dim = block;
    grid_dim = grid;
    const int threads = int(block.x * block.y * block.z);
    fiber_body = [&] { kernel(args...); };
    std::vector<std::unique_ptr<char[]>> stacks;
    for (int t = 0; t < threads; ++t) stacks.emplace_back(new char[FIBER_STACK]);
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                Workgroup group(threads);
                Fibers state;
                state.contexts.resize(threads);
                state.finished.assign(threads, 0);
                for (int t = 0; t < threads; ++t) {
                    ucontext_t& context = state.contexts[t];
                    getcontext(&context);
                    context.uc_stack.ss_sp = stacks[t].get();
                    context.uc_stack.ss_size = FIBER_STACK;
                    context.uc_link = &state.scheduler;
                    makecontext(&context, fiber_main, 0);
                }
                fibers = &state;
                workgroup = &group;
                block_idx = dim3(bx, by, bz);
                for (int live = threads; live > 0;) {
                    live = 0;
                    for (int t = 0; t < threads; ++t) {
                        if (state.finished[t]) continue;
                        state.current = linear_tid = t;
                        thread_idx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                        swapcontext(&state.scheduler, &state.contexts[t]);
                        live += !state.finished[t];
                    }
                }
                fibers = nullptr;
            }
}

// e4m3fnuz: sign, 4 exponent bits (bias 8), 3 mantissa bits; 0x80 is NaN; exponent 0 is subnormal.
inline double fp8_e4m3fnuz(uint8_t v) {
    if (v == 0x80) return NAN;
    const int exponent = (v >> 3) & 0xF, mantissa = v & 0x7;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa / 8.0, 1 - 8) : std::ldexp(1.0 + mantissa / 8.0, exponent - 8);
    return (v & 0x80) ? -magnitude : magnitude;
}

inline uint8_t byte_of(int64_t operand, int reg, int byte) {
    return uint8_t(uint64_t(operand) >> (32 * reg + 8 * byte));
}

// The tables, from KSCI_MFMA_LAYOUTS: for an F x F x K instruction, mfmaF_a[i][k] and mfmaF_b[k][j] = {lane,
// register, byte}; mfmaF_d[lane][register] = {i, j}.
#include KSCI_MFMA_LAYOUTS

template <int F, int K>
struct Layout;
template <>
struct Layout<32, 16> {
    static constexpr const int (&a)[32][16][3] = mfma32_a;
    static constexpr const int (&b)[16][32][3] = mfma32_b;
    static constexpr const int (&d)[WAVE][16][2] = mfma32_d;
};
template <>
struct Layout<16, 32> {
    static constexpr const int (&a)[16][32][3] = mfma16_a;
    static constexpr const int (&b)[32][16][3] = mfma16_b;
    static constexpr const int (&d)[WAVE][4][2] = mfma16_d;
};

// D = A B + C for one wave: 32x32x16 when the accumulator has 16 floats a lane, 16x16x32 when it has 4.
template <class Acc>
Acc mfma_fp8(int64_t a, int64_t b, Acc c) {
    constexpr int ACC = sizeof(Acc) / sizeof(float);
    static_assert(ACC == 16 || ACC == 4, "an fp8 MFMA accumulator is 16 (32x32x16) or 4 (16x16x32) floats");
    constexpr int F = ACC == 16 ? 32 : 16, K = ACC == 16 ? 16 : 32;
    using L = Layout<F, K>;
    const int wave = linear_tid / WAVE, lane = linear_tid % WAVE;
    WaveSlots& slots = workgroup->slots[wave];
    slots.a[lane] = a;
    slots.b[lane] = b;
    for (int r = 0; r < ACC; ++r) slots.c[lane][r] = c[r];
    workgroup->waves[wave]->arrive_and_wait();
    Acc d;
    for (int r = 0; r < ACC; ++r) {
        const int i = L::d[lane][r][0], j = L::d[lane][r][1];
        double sum = 0.0;
        for (int k = 0; k < K; ++k) {
            const int* at = L::a[i][k];
            const int* bt = L::b[k][j];
            sum += fp8_e4m3fnuz(byte_of(slots.a[at[0]], at[1], at[2])) *
                   fp8_e4m3fnuz(byte_of(slots.b[bt[0]], bt[1], bt[2]));
        }
        // The C element at (i, j) is the one its own lane and register hold: this lane, register r.
        d[r] = float(double(slots.c[lane][r]) + sum);
    }
    workgroup->waves[wave]->arrive_and_wait();
    return d;
}

// __shfl_xor: every lane of the wave deposits its value, then reads lane ^ mask's (within its `width` segment).
template <class T>
T shfl_xor(T value, int mask, int width) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffled value is at most 8 bytes");
    const int wave = linear_tid / WAVE, lane = linear_tid % WAVE;
    WaveSlots& slots = workgroup->slots[wave];
    std::memcpy(&slots.shuffled[lane], &value, sizeof(T));
    workgroup->waves[wave]->arrive_and_wait();
    const int source = (lane & ~(width - 1)) | ((lane ^ mask) & (width - 1));
    T got;
    std::memcpy(&got, &slots.shuffled[source], sizeof(T));
    workgroup->waves[wave]->arrive_and_wait();
    return got;
}

}  // namespace ksci_hip

#define threadIdx ksci_hip::thread_idx
#define blockIdx ksci_hip::block_idx
#define blockDim ksci_hip::block_dim
#define gridDim ksci_hip::grid_dim
#define warpSize ksci_hip::WAVE
#define KSCI_EMULATE_MFMA(a, b, c) ksci_hip::mfma_fp8((int64_t)(a), (int64_t)(b), (c))
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
    ksci_hip::launch(kernel, dim3(grid), dim3(block), __VA_ARGS__)

inline void __syncthreads() { ksci_hip::workgroup->block.arrive_and_wait(); }
template <class T>
T __shfl_xor(T value, int mask, int width = ksci_hip::WAVE) {
    return ksci_hip::shfl_xor(value, mask, width);
}
inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
struct uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomicAdd(int* address, int value) { return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST); }
inline int atomicExch(int* address, int value) { return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST); }
inline hipError_t hipGetLastError() { return hipSuccess; }

// Device memory is host memory here; the device is an MI300X as far as its size goes (304 CUs), one workgroup at
// a time per CU.
enum hipDeviceAttribute_t { hipDeviceAttributeMultiprocessorCount };
inline hipError_t hipGetDevice(int* device) {
    *device = 0;
    return hipSuccess;
}
inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int) {
    *value = attribute == hipDeviceAttributeMultiprocessorCount ? 304 : 0;
    return hipSuccess;
}
template <class Kernel>
hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, Kernel, int, size_t) {
    *blocks = 1;
    return hipSuccess;
}
template <class T>
hipError_t hipMalloc(T** pointer, size_t bytes) {
    *pointer = static_cast<T*>(std::malloc(bytes));
    return *pointer ? hipSuccess : 2;  // hipErrorOutOfMemory
}
inline hipError_t hipFree(void* pointer) {
    std::free(pointer);
    return hipSuccess;
}
inline hipError_t hipMemsetAsync(void* pointer, int value, size_t bytes, hipStream_t) {
    std::memset(pointer, value, bytes);
    return hipSuccess;
}
inline float __uint_as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
using std::max;
using std::min;
