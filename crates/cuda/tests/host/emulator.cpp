// The CUDA kernels as a host library: `rinfer_emulate_launch` runs one launch of a kernel, by
// name, under the CUDA emulation, with its arguments as 8-byte slots (rinfer_cuda::program::
// Arg::to_slot) whose pointers are host addresses. The tests build it as a shared library and
// run whole forward steps through it.
#include "cuda_emulation.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "../../src/kernels/common.cuh"
#include "../../src/kernels/dequant.cuh"
#include "codebooks.cuh"  // generated into the build folder (kernels::codebooks)
#include "../../src/kernels/dequant_iq.cuh"
#include "../../src/kernels/reduce.cuh"
#include "../../src/kernels/matmul.cu"
#include "../../src/kernels/matvec_q8_1.cu"
#include "../../src/kernels/norm.cu"
#include "../../src/kernels/rope.cu"
#include "../../src/kernels/attention.cu"
#include "../../src/kernels/elementwise.cu"
#include "../../src/kernels/moe.cu"
#include "../../src/kernels/mma.cu"
#include "../../src/kernels/attention_mma.cu"

template <typename T>
static T unpack(unsigned long long slot) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<T>(static_cast<uintptr_t>(slot));
    } else if constexpr (std::is_same_v<T, float>) {
        const uint32_t bits = static_cast<uint32_t>(slot);
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    } else if constexpr (std::is_same_v<T, int>) {
        return static_cast<int>(static_cast<uint32_t>(slot));
    } else {
        static_assert(std::is_same_v<T, long long>);
        return static_cast<long long>(slot);
    }
}

template <typename... P, size_t... I>
static void call(void (*kernel)(P...), dim3 grid, dim3 block, const unsigned long long* args,
                 std::index_sequence<I...>) {
    launch(kernel, grid, block, unpack<P>(args[I])...);
}

// 0: launched; 2: wrong argument count.
template <typename... P>
static int run(void (*kernel)(P...), dim3 grid, dim3 block, const unsigned long long* args,
               int nargs) {
    if (nargs != (int)sizeof...(P)) return 2;
    call(kernel, grid, block, args, std::index_sequence_for<P...>{});
    return 0;
}

// 0: launched; 1: unknown kernel; 2: wrong argument count.
extern "C" int rinfer_emulate_launch(const char* name, const unsigned* grid, const unsigned* block,
                                     const unsigned long long* args, int nargs) {
    const std::string k = name;
    const dim3 g{grid[0], grid[1], grid[2]}, b{block[0], block[1], block[2]};
#define KERNEL(f) \
    if (k == #f) return run(f, g, b, args, nargs);
    KERNEL(rms_norm)
    KERNEL(add_rms_norm)
    KERNEL(layer_norm)
    KERNEL(head_rms_norm)
    KERNEL(rope)
    KERNEL(attention_decode_combine)
    KERNEL(kv_copy_block)
#define KV_KERNELS(suffix) KERNEL(kv_store_##suffix) KERNEL(kv_store_rows_##suffix) KERNEL(attention_decode_##suffix) KERNEL(attention_decode_rows_##suffix)
    KV_KERNELS(f32)
    KV_KERNELS(f16)
    KV_KERNELS(q8_0)
    KERNEL(attention_prefill_f32)
    KERNEL(attention_prefill_q8_0)
    KERNEL(attention_prefill_mma_f16_64)
    KERNEL(attention_prefill_mma_f16_128)
    KERNEL(attention_prefill_mma_f16_256)
    KERNEL(gated_activation)
    KERNEL(gated_activation_q8_1)
    KERNEL(add_inplace)
    KERNEL(add2_inplace)
    KERNEL(softcap)
    KERNEL(argmax)
    KERNEL(moe_route)
    KERNEL(moe_group)
    KERNEL(moe_weighted_sum)
    KERNEL(quantize_q8_1)
#define WEIGHT_KERNELS(suffix) KERNEL(matvec_##suffix) KERNEL(matmul_##suffix) KERNEL(matvec_id_##suffix) KERNEL(matmul_id_##suffix) KERNEL(get_rows_##suffix)
#define Q8_1_KERNELS(suffix) KERNEL(matvec_q8_1_##suffix) KERNEL(matvec_batch_q8_1_##suffix)
#define MMA_KERNELS(suffix) KERNEL(mma_##suffix) KERNEL(mma_id_##suffix)
    WEIGHT_KERNELS(f32)
    WEIGHT_KERNELS(f16)
    WEIGHT_KERNELS(bf16)
// Every quantized format has the integer matvec and the tensor-core matmul too.
#define QUANTIZED_KERNELS(suffix) WEIGHT_KERNELS(suffix) Q8_1_KERNELS(suffix) MMA_KERNELS(suffix)
    QUANTIZED_KERNELS(q4_0)
    QUANTIZED_KERNELS(q4_1)
    QUANTIZED_KERNELS(q5_0)
    QUANTIZED_KERNELS(q5_1)
    QUANTIZED_KERNELS(q8_0)
    QUANTIZED_KERNELS(mxfp4)
    QUANTIZED_KERNELS(q2_k)
    QUANTIZED_KERNELS(q3_k)
    QUANTIZED_KERNELS(q4_k)
    QUANTIZED_KERNELS(q5_k)
    QUANTIZED_KERNELS(q6_k)
    QUANTIZED_KERNELS(iq1_s)
    QUANTIZED_KERNELS(iq1_m)
    QUANTIZED_KERNELS(iq2_xxs)
    QUANTIZED_KERNELS(iq2_xs)
    QUANTIZED_KERNELS(iq2_s)
    QUANTIZED_KERNELS(iq3_xxs)
    QUANTIZED_KERNELS(iq3_s)
    QUANTIZED_KERNELS(iq4_nl)
    QUANTIZED_KERNELS(iq4_xs)
    QUANTIZED_KERNELS(tq1_0)
    QUANTIZED_KERNELS(tq2_0)
    return 1;
}
