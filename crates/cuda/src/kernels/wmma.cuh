// The part of CUDA's warp matrix API (nvcuda::wmma, <mma.h>) the tensor-core kernels use:
// bf16 and f16 16x16x16 tiles with f32 accumulators. NVRTC without a toolkit's include
// folder has no <mma.h> (NVRTC 12.9 ships no built-in copy), so this header writes the same
// calls in PTX (`wmma.load`, `wmma.mma`, `wmma.store`, sm_80 and later) under the same names
// and signatures, in namespace `wmma`. bf16 and f16 values travel as their 16 bits (`u16`).
// The host emulation (tests/host/cuda_emulation.h) defines the same namespace for the host, so
// the kernels compile unchanged under both; device only, never included by the emulation.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "rinfer's GPU kernels need compute capability 8.0 (Ampere) or newer: bf16 tensor cores"
#endif

namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// A bf16 value as its bits (the upper half of the f32 it rounds).
typedef u16 bf16;

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment;

// Eight bf16 of the tile per lane, in four 32-bit registers (layout opaque, as in <mma.h>).
template <>
struct fragment<matrix_a, 16, 16, 16, bf16, row_major> {
    u32 x[4];
};

template <>
struct fragment<matrix_b, 16, 16, 16, bf16, col_major> {
    u32 x[4];
};

// Eight f32 of the 16x16 accumulator per lane.
template <>
struct fragment<accumulator, 16, 16, 16, float, void> {
    float x[8];
};

typedef fragment<matrix_a, 16, 16, 16, bf16, row_major> bf16_a_row;
typedef fragment<matrix_b, 16, 16, 16, bf16, col_major> bf16_b_col;
typedef fragment<accumulator, 16, 16, 16, float, void> f32_acc;

// IEEE half tiles (<mma.h>'s __half), whose values travel as their 16 bits (u16): sixteen per
// lane, in eight 32-bit registers.
struct f16 {};

template <typename Layout>
struct fragment<matrix_a, 16, 16, 16, f16, Layout> {
    u32 x[8];
};

template <typename Layout>
struct fragment<matrix_b, 16, 16, 16, f16, Layout> {
    u32 x[8];
};

typedef fragment<matrix_a, 16, 16, 16, f16, row_major> f16_a_row;
typedef fragment<matrix_b, 16, 16, 16, f16, col_major> f16_b_col;
typedef fragment<matrix_b, 16, 16, 16, f16, row_major> f16_b_row;

__device__ __forceinline__ void fill_fragment(f32_acc& f, float v) {
#pragma unroll
    for (int i = 0; i < 8; i++) f.x[i] = v;
}

// A 16x16 tile, element (m, k) at p[m * ldm + k]; p 32-byte aligned, ldm a multiple of 8.
__device__ __forceinline__ void load_matrix_sync(bf16_a_row& f, const bf16* p, unsigned ldm) {
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3])
                 : "l"(p), "r"(ldm)
                 : "memory");
}

// A 16x16 tile, element (k, n) at p[n * ldm + k]; p 32-byte aligned, ldm a multiple of 8.
__device__ __forceinline__ void load_matrix_sync(bf16_b_col& f, const bf16* p, unsigned ldm) {
    asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3])
                 : "l"(p), "r"(ldm)
                 : "memory");
}

#define WMMA_LOAD_F16(Fragment, op)                                                             \
    __device__ __forceinline__ void load_matrix_sync(Fragment& f, const u16* p, unsigned ldm) {  \
        asm volatile(op " {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"                            \
                     : "=r"(f.x[0]), "=r"(f.x[1]), "=r"(f.x[2]), "=r"(f.x[3]), "=r"(f.x[4]),     \
                       "=r"(f.x[5]), "=r"(f.x[6]), "=r"(f.x[7])                                   \
                     : "l"(p), "r"(ldm)                                                           \
                     : "memory");                                                                 \
    }

// f16 tiles: A element (m, k) at p[m * ldm + k]; B element (k, n) at p[n * ldm + k] (col) or
// p[k * ldm + n] (row); p 32-byte aligned, ldm a multiple of 8.
WMMA_LOAD_F16(f16_a_row, "wmma.load.a.sync.aligned.row.m16n16k16.f16")
WMMA_LOAD_F16(f16_b_col, "wmma.load.b.sync.aligned.col.m16n16k16.f16")
WMMA_LOAD_F16(f16_b_row, "wmma.load.b.sync.aligned.row.m16n16k16.f16")

// An accumulator, element (m, n) from p[m * ldm + n]: mem_row_major only (the kernels store
// and reload their accumulators row-major); p 32-byte aligned, ldm a multiple of 4.
__device__ __forceinline__ void load_matrix_sync(f32_acc& f, const float* p, unsigned ldm,
                                                 layout_t) {
    asm volatile(
        "wmma.load.c.sync.aligned.row.m16n16k16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
        : "=f"(f.x[0]), "=f"(f.x[1]), "=f"(f.x[2]), "=f"(f.x[3]), "=f"(f.x[4]), "=f"(f.x[5]),
          "=f"(f.x[6]), "=f"(f.x[7])
        : "l"(p), "r"(ldm)
        : "memory");
}

#define WMMA_MMA_F16(B, op)                                                                       \
    __device__ __forceinline__ void mma_sync(f32_acc& d, const f16_a_row& a, const B& b,         \
                                             const f32_acc& c) {                                 \
        asm volatile(op " {%0, %1, %2, %3, %4, %5, %6, %7}, "                                     \
                        "{%8, %9, %10, %11, %12, %13, %14, %15}, "                                \
                        "{%16, %17, %18, %19, %20, %21, %22, %23}, "                              \
                        "{%24, %25, %26, %27, %28, %29, %30, %31};"                               \
                     : "=f"(d.x[0]), "=f"(d.x[1]), "=f"(d.x[2]), "=f"(d.x[3]), "=f"(d.x[4]),     \
                       "=f"(d.x[5]), "=f"(d.x[6]), "=f"(d.x[7])                                   \
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(a.x[4]),          \
                       "r"(a.x[5]), "r"(a.x[6]), "r"(a.x[7]), "r"(b.x[0]), "r"(b.x[1]),          \
                       "r"(b.x[2]), "r"(b.x[3]), "r"(b.x[4]), "r"(b.x[5]), "r"(b.x[6]),          \
                       "r"(b.x[7]), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]),          \
                       "f"(c.x[4]), "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]));                       \
    }

// d = a b + c over f16 tiles, B column- or row-major.
WMMA_MMA_F16(f16_b_col, "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32")
WMMA_MMA_F16(f16_b_row, "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32")

// d = a b + c.
__device__ __forceinline__ void mma_sync(f32_acc& d, const bf16_a_row& a, const bf16_b_col& b,
                                         const f32_acc& c) {
    asm volatile(
        "wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
        "{%16, %17, %18, %19, %20, %21, %22, %23};"
        : "=f"(d.x[0]), "=f"(d.x[1]), "=f"(d.x[2]), "=f"(d.x[3]), "=f"(d.x[4]), "=f"(d.x[5]),
          "=f"(d.x[6]), "=f"(d.x[7])
        : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]),
          "r"(b.x[2]), "r"(b.x[3]), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]),
          "f"(c.x[4]), "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]));
}

// Element (m, n) to p[m * ldm + n] (mem_row_major) or p[n * ldm + m] (mem_col_major); p
// 32-byte aligned, ldm a multiple of 4.
__device__ __forceinline__ void store_matrix_sync(float* p, const f32_acc& f, unsigned ldm,
                                                  layout_t layout) {
    if (layout == mem_row_major) {
        asm volatile(
            "wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, "
            "%8}, %9;" ::"l"(p),
            "f"(f.x[0]), "f"(f.x[1]), "f"(f.x[2]), "f"(f.x[3]), "f"(f.x[4]), "f"(f.x[5]),
            "f"(f.x[6]), "f"(f.x[7]), "r"(ldm)
            : "memory");
    } else {
        asm volatile(
            "wmma.store.d.sync.aligned.col.m16n16k16.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, "
            "%8}, %9;" ::"l"(p),
            "f"(f.x[0]), "f"(f.x[1]), "f"(f.x[2]), "f"(f.x[3]), "f"(f.x[4]), "f"(f.x[5]),
            "f"(f.x[6]), "f"(f.x[7]), "r"(ldm)
            : "memory");
    }
}

}  // namespace wmma
