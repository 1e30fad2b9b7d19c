// Runs the CUDA C kernels on the host for tests. Every CUDA thread of a block is a fiber on
// the calling OS thread (started with ucontext, switched with _setjmp/_longjmp); __syncthreads
// and warp shuffles are barriers at which a fiber yields until every live thread of its block
// (or warp) has arrived. Each fiber runs its thread in every block of the grid in turn, all
// fibers meeting at the end of each block, so `__shared__` variables can be plain statics. As
// on a GPU, threads that have returned no longer take part in barriers. Slow, and only for
// small launches, but it executes the very source NVRTC compiles.
#pragma once

#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct float4 {
    float x, y, z, w;
};
struct int4 {
    int x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(x)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

inline float __uint_as_float(unsigned int u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
// c + the dot product of the four signed bytes of a with those of b.
inline int __dp4a(int a, int b, int c) {
    for (int k = 0; k < 4; k++) c += (int)(signed char)(a >> (8 * k)) * (int)(signed char)(b >> (8 * k));
    return c;
}
inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    std::memcpy(&u, &f, 4);
    return u;
}

namespace emulation {

// Barrier releases and finished blocks: if a round over all threads adds none, every live
// thread waits at a barrier that can never complete.
inline unsigned long long progress = 0;

// One barrier scope (the block, or one warp): how many live threads it has, how many have
// arrived, and a generation that advances each time all of them have.
struct Barrier {
    int live = 0, arrived = 0;
    unsigned long long generation = 0;
    void release_if_complete() {
        if (arrived > 0 && arrived >= live) {
            arrived = 0;
            generation++;
            progress++;
        }
    }
};

struct Launch {
    unsigned threads = 0;
    dim3 grid;
    ucontext_t start;
    jmp_buf scheduler;
    std::vector<ucontext_t> contexts;
    struct Jump {
        jmp_buf buf;
    };
    std::vector<Jump> fibers;
    std::vector<char> started, done;
    std::vector<dim3> index;
    Barrier block, end;
    std::vector<Barrier> warps;
    std::vector<unsigned long long> exchange;
    unsigned current = 0;
    bool finished = false;
    std::function<void()> body;

    void reset_barriers() {
        block.live = (int)threads;
        block.arrived = 0;
        for (unsigned w = 0; w < warps.size(); w++) {
            warps[w].live = (int)std::min(32u, threads - 32 * w);
            warps[w].arrived = 0;
        }
    }

    // Moves every thread to the next block of the grid (x fastest), or finishes.
    void next_block() {
        if (++blockIdx.x == grid.x) {
            blockIdx.x = 0;
            if (++blockIdx.y == grid.y) {
                blockIdx.y = 0;
                if (++blockIdx.z == grid.z) finished = true;
            }
        }
        reset_barriers();
    }
};

inline Launch* active = nullptr;

inline void yield() {
    if (!_setjmp(active->fibers[active->current].buf)) _longjmp(active->scheduler, 1);
}

inline void wait(Barrier& b) {
    const unsigned long long generation = b.generation;
    b.arrived++;
    b.release_if_complete();
    while (b.generation == generation) yield();
}

// The thread has returned from the kernel in this block: leave its barriers, then wait for the
// whole block to finish before the next one starts.
inline void end_of_block() {
    Launch& l = *active;
    l.block.live--;
    l.block.release_if_complete();
    Barrier& warp = l.warps[l.current / 32];
    warp.live--;
    warp.release_if_complete();
    const unsigned long long generation = l.end.generation;
    if (++l.end.arrived == (int)l.threads) {
        l.end.arrived = 0;
        l.next_block();
        l.end.generation++;
        progress++;
    } else {
        while (l.end.generation == generation) yield();
    }
}

inline void fiber_main() {
    while (!active->finished) {
        active->body();
        end_of_block();
    }
    active->done[active->current] = 1;
    progress++;
    _longjmp(active->scheduler, 1);
}

}  // namespace emulation

inline void __syncthreads() { emulation::wait(emulation::active->block); }

template <typename T>
T __shfl_xor_sync(unsigned, T value, int offset) {
    emulation::Launch& l = *emulation::active;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned long long* slots = &l.exchange[warp * 32];
    std::memcpy(&slots[lane], &value, sizeof(T));
    emulation::wait(l.warps[warp]);
    T out;
    std::memcpy(&out, &slots[lane ^ offset], sizeof(T));
    emulation::wait(l.warps[warp]);
    return out;
}

inline void __syncwarp(unsigned = 0xffffffffu) {
    emulation::wait(emulation::active->warps[threadIdx.x >> 5]);
}

// The warp matrix API (nvcuda::wmma of <mma.h>, which the device code gets from
// src/kernels/wmma.cuh under the same names): bf16 and f16 16x16x16 tiles, f32 accumulators. Each
// lane holds the whole tile, and every call begins with a warp barrier, so a call that not all
// lanes of the warp reach deadlocks as it would on a GPU. store_matrix_sync writes only the
// lane's share of the tile (elements lane, lane + 32, ...), so reading what other lanes stored
// without a __syncwarp in between reads stale memory, as it may on a GPU.
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

typedef unsigned short bf16;

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "only 16x16x16 tiles are emulated");
    float x[256];  // a: (m, k) at 16 m + k; b: (k, n) at 16 k + n; accumulator: (m, n) at 16 m + n
};

typedef fragment<matrix_a, 16, 16, 16, bf16, row_major> bf16_a_row;
typedef fragment<matrix_b, 16, 16, 16, bf16, col_major> bf16_b_col;
typedef fragment<accumulator, 16, 16, 16, float, void> f32_acc;

inline void warp_barrier() { __syncwarp(); }

inline float from_bf16(bf16 b) { return __uint_as_float((unsigned)b << 16); }

inline void fill_fragment(f32_acc& f, float v) {
    for (float& e : f.x) e = v;
}

inline void load_matrix_sync(bf16_a_row& f, const bf16* p, unsigned ldm) {
    warp_barrier();
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 16; k++) f.x[16 * m + k] = from_bf16(p[m * ldm + k]);
}

inline void load_matrix_sync(bf16_b_col& f, const bf16* p, unsigned ldm) {
    warp_barrier();
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++) f.x[16 * k + n] = from_bf16(p[n * ldm + k]);
}

// d = a b + c, each product exact in f32 (bf16 × bf16 or f16 × f16) and summed in k order.
template <typename A, typename B>
inline void mma_sync(f32_acc& d, const A& a, const B& b, const f32_acc& c) {
    warp_barrier();
    float out[256];
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float s = c.x[16 * m + n];
            for (int k = 0; k < 16; k++) s += a.x[16 * m + k] * b.x[16 * k + n];
            out[16 * m + n] = s;
        }
    std::memcpy(d.x, out, sizeof out);
}

// IEEE half tiles, their values as 16 bits.
struct f16 {};

typedef fragment<matrix_a, 16, 16, 16, f16, row_major> f16_a_row;
typedef fragment<matrix_b, 16, 16, 16, f16, col_major> f16_b_col;
typedef fragment<matrix_b, 16, 16, 16, f16, row_major> f16_b_row;

inline float from_f16(unsigned short h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return (float)v;
}

inline void load_matrix_sync(f16_a_row& f, const unsigned short* p, unsigned ldm) {
    warp_barrier();
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 16; k++) f.x[16 * m + k] = from_f16(p[m * ldm + k]);
}

inline void load_matrix_sync(f16_b_col& f, const unsigned short* p, unsigned ldm) {
    warp_barrier();
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++) f.x[16 * k + n] = from_f16(p[n * ldm + k]);
}

inline void load_matrix_sync(f16_b_row& f, const unsigned short* p, unsigned ldm) {
    warp_barrier();
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++) f.x[16 * k + n] = from_f16(p[k * ldm + n]);
}

// The whole accumulator tile from p, row-major as on the device (every lane reads all of it).
inline void load_matrix_sync(f32_acc& f, const float* p, unsigned ldm, layout_t) {
    warp_barrier();
    for (unsigned e = 0; e < 256; e++) f.x[e] = p[e / 16 * ldm + e % 16];
}

inline void store_matrix_sync(float* p, const f32_acc& f, unsigned ldm, layout_t layout) {
    warp_barrier();
    for (unsigned e = threadIdx.x & 31; e < 256; e += 32) {
        const unsigned m = e / 16, n = e % 16;
        p[layout == mem_row_major ? m * ldm + n : n * ldm + m] = f.x[e];
    }
}

}  // namespace wmma

// kernel<<<grid, block>>>(args...), synchronously. Block dimensions must be whole warps.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, Args... args) {
    constexpr size_t stack_bytes = 64 * 1024;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    emulation::Launch l;
    l.threads = block.x * block.y * block.z;
    l.grid = grid;
    const unsigned warps = (l.threads + 31) / 32;
    l.contexts.resize(l.threads);
    l.fibers.resize(l.threads);
    l.started.assign(l.threads, 0);
    l.done.assign(l.threads, 0);
    l.index.resize(l.threads);
    l.warps.resize(warps);
    l.exchange.resize(warps * 32);
    l.end.live = (int)l.threads;
    l.reset_barriers();
    std::unique_ptr<char[]> stacks(new char[stack_bytes * l.threads]);
    for (unsigned t = 0; t < l.threads; t++) {
        l.index[t] = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        getcontext(&l.contexts[t]);
        l.contexts[t].uc_stack.ss_sp = &stacks[stack_bytes * t];
        l.contexts[t].uc_stack.ss_size = stack_bytes;
        l.contexts[t].uc_link = nullptr;
        makecontext(&l.contexts[t], emulation::fiber_main, 0);
    }
    l.body = [&] { kernel(args...); };
    emulation::Launch* outer = emulation::active;
    emulation::active = &l;
    blockDim = block;
    gridDim = grid;
    blockIdx = {0, 0, 0};
    for (unsigned remaining = l.threads; remaining > 0;) {
        const unsigned long long before = emulation::progress;
        remaining = 0;
        for (unsigned t = 0; t < l.threads; t++) {
            if (l.done[t]) continue;
            l.current = t;
            threadIdx = l.index[t];
            if (!_setjmp(l.scheduler)) {
                if (!l.started[t]) {
                    l.started[t] = 1;
                    swapcontext(&l.start, &l.contexts[t]);
                } else {
                    _longjmp(l.fibers[t].buf, 1);
                }
            }
            remaining += l.done[t] ? 0 : 1;
        }
        if (remaining > 0 && emulation::progress == before) {
            std::fprintf(stderr, "deadlock: threads wait at a barrier others never reach\n");
            std::abort();
        }
    }
    emulation::active = outer;
}
