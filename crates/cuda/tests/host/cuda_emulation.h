// Runs the CUDA C kernels on the host for tests: every CUDA thread of a block is a std::thread,
// __syncthreads is a block barrier, warp shuffles exchange through a per-warp barrier, and
// blocks run one after another on the same threads (so `__shared__` variables can be plain
// statics). A thread that returns early still meets the barrier that ends its block, so, as on
// a GPU, a kernel must not return before a __syncthreads some of its threads still reach. Slow,
// and only for tiny launches, but it executes the very source NVRTC compiles.
#pragma once

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct float4 {
    float x, y, z, w;
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(x)
#define __shared__ static

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

struct BlockSync {
    explicit BlockSync(unsigned threads) : block(threads), exchange(threads + 32) {
        for (unsigned first = 0; first < threads; first += 32) {
            warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads - first)));
        }
    }
    std::barrier<> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<unsigned long long> exchange;
};

inline thread_local BlockSync* current_block = nullptr;

inline void __syncthreads() { current_block->block.arrive_and_wait(); }

template <typename T>
T __shfl_xor_sync(unsigned, T value, int offset) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned long long* slots = &current_block->exchange[warp * 32];
    std::memcpy(&slots[lane], &value, sizeof(T));
    current_block->warps[warp]->arrive_and_wait();
    T out;
    std::memcpy(&out, &slots[lane ^ offset], sizeof(T));
    current_block->warps[warp]->arrive_and_wait();
    return out;
}

// kernel<<<grid, block>>>(args...), synchronously.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, Args... args) {
    const unsigned threads = block.x * block.y * block.z;
    BlockSync sync(threads);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            blockDim = block;
            gridDim = grid;
            current_block = &sync;
            for (unsigned z = 0; z < grid.z; z++)
                for (unsigned y = 0; y < grid.y; y++)
                    for (unsigned x = 0; x < grid.x; x++) {
                        blockIdx = {x, y, z};
                        kernel(args...);
                        sync.block.arrive_and_wait();
                    }
        });
    }
    for (auto& th : pool) th.join();
}
