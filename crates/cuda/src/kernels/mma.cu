// Prefill matmul on tensor cores for the quantized weight formats: y[t, r] = W[r] · x[t] + b[r]
// with W and x rounded to bf16 (round to nearest even) and the products summed in f32.
//
// A block computes a tile of MMA_ROWS weight rows × MMA_TOKENS tokens with MMA_WARPS warps
// (4 × 2, each 32 rows × 32 tokens = 2 × 2 wmma accumulators of 16 × 16). It walks the
// columns MMA_K at a time: each thread reads one 32-element chunk of one weight row as the
// format's codes (dequant.cuh: a few wide loads instead of a load per byte) and four float4
// of activations, converts them to bf16 and stores them in shared memory (rows skewed by 8
// elements against bank conflicts),
// then the warps multiply the tile out of shared memory with wmma. Loads are double-buffered
// through registers: the next tile's weights and activations are fetched before the current
// tile is multiplied. Rows, tokens and columns past the matrix read as zeros; results go
// through a per-warp 16 × 16 staging tile so bias and bounds apply per element.
//
// mma_* takes the arguments of matmul_* (matmul.cu) with grid (⌈rows / MMA_ROWS⌉,
// ⌈n / MMA_TOKENS⌉). mma_id_* is the mixture-of-experts variant with matmul_id_*'s
// arguments: per grid.y one group of up to MMA_TOKENS of the slots one expert received
// (moe_group's lists, `groups` groups per expert), x row slot / x_div, y row slot, expert e's
// weights at w + e * expert_bytes and its bias at bias + e * rows.
//
// Needs sm_80 (bf16 wmma); F32, F16 and BF16 weights keep matmul.cu's f32 kernels.

#define MMA_ROWS 128
#define MMA_TOKENS 64
#define MMA_K 64
#define MMA_WARPS 8
#define MMA_LD (MMA_K + 8)

// f32 to bf16 bits, rounding to nearest even; NaN stays NaN.
__device__ __forceinline__ u32 bf16_bits(float f) {
    const u32 b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
    return bf16_bits(lo) | (bf16_bits(hi) << 16);
}

// One block's tile: tokens t0..t0 + nt of a list whose token j reads x row xrow(j) and writes
// y row yrow(j) (j itself, or a routed slot).
struct MmaTokens {
    const int* slots;  // null: token j is row j
    int x_div;
    __device__ __forceinline__ int x_row(int j) const { return slots ? slots[j] / x_div : j; }
    __device__ __forceinline__ int y_row(int j) const { return slots ? slots[j] : j; }
};

template <typename F>
__device__ __forceinline__ void mma_tile(const u8* __restrict__ w, long long row_bytes,
                                         const float* __restrict__ x, int ldx,
                                         float* __restrict__ y, int ldy,
                                         const float* __restrict__ bias, int rows, int cols,
                                         MmaTokens tokens, int t0, int nt) {
    __shared__ __align__(32) wmma::bf16 w_tile[MMA_ROWS * MMA_LD];
    __shared__ __align__(32) wmma::bf16 x_tile[MMA_TOKENS * MMA_LD];
    __shared__ __align__(32) float staging[MMA_WARPS][256];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int r0 = blockIdx.x * MMA_ROWS;
    const int chunks = cols >> 5;

    // This thread's weight chunk: row tid / 2, chunk tid % 2 of each MMA_K step.
    const int w_row = tid >> 1, w_half = tid & 1;
    const u8* w_ptr = r0 + w_row < rows ? w + (size_t)(r0 + w_row) * (size_t)row_bytes : nullptr;
    // Its activations: tokens tid / 16 + 16 i, columns 4 (tid % 16) .. + 4 of each step.
    const int x_col = 4 * (tid & 15);
    const float* x_ptr[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int j = (tid >> 4) + 16 * i;
        x_ptr[i] = j < nt ? x + (size_t)tokens.x_row(t0 + j) * ldx + x_col : nullptr;
    }

    // The weight chunk as the format's codes (`codes` in dequant.cuh): 8 words of int8
    // codes and an affine map per half.
    int wc[8];
    float wa[2], wb[2];
    float4 xv[4];
    auto fetch = [&](int k0) {
        const int chunk = (k0 >> 5) + w_half;
        if (w_ptr && chunk < chunks) {
            F::codes(w_ptr, chunk, wc, wa, wb);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) wc[i] = 0;
            wa[0] = wa[1] = wb[0] = wb[1] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (x_ptr[i] && k0 + x_col < cols) {
                xv[i] = *(const float4*)(x_ptr[i] + k0);
            } else {
                xv[i] = float4{0.0f, 0.0f, 0.0f, 0.0f};
            }
        }
    };
    // Weight j of the chunk, a[j / 16] * c[j] + b[j / 16] rounded once: deq32's value.
    auto weight = [&](int j) {
        const int code = (int)(i8)(u8)((u32)wc[j >> 2] >> (8 * (j & 3)));
        return fmaf(wa[j >> 4], (float)code, wb[j >> 4]);
    };
    auto put = [&]() {
        uint4* wd = (uint4*)(w_tile + w_row * MMA_LD + 32 * w_half);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int j = 8 * q;
            wd[q] = uint4{pack_bf16(weight(j), weight(j + 1)), pack_bf16(weight(j + 2), weight(j + 3)),
                          pack_bf16(weight(j + 4), weight(j + 5)),
                          pack_bf16(weight(j + 6), weight(j + 7))};
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint2* xd = (uint2*)(x_tile + ((tid >> 4) + 16 * i) * MMA_LD + x_col);
            *xd = uint2{pack_bf16(xv[i].x, xv[i].y), pack_bf16(xv[i].z, xv[i].w)};
        }
    };

    const int wr = warp & 3, wt = warp >> 2;
    wmma::f32_acc acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    fetch(0);
    for (int k0 = 0; k0 < cols; k0 += MMA_K) {
        put();
        __syncthreads();
        if (k0 + MMA_K < cols) fetch(k0 + MMA_K);
#pragma unroll
        for (int kk = 0; kk < MMA_K; kk += 16) {
            wmma::bf16_a_row a[2];
            wmma::bf16_b_col b[2];
#pragma unroll
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(a[i], w_tile + (32 * wr + 16 * i) * MMA_LD + kk, MMA_LD);
#pragma unroll
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(b[j], x_tile + (32 * wt + 16 * j) * MMA_LD + kk, MMA_LD);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    // Each accumulator through the warp's staging tile (element (m, n) at n * 16 + m), then
    // to y with the bias, 16 consecutive rows of a token per half-warp.
    float* stage = staging[warp];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_col_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int r = r0 + 32 * wr + 16 * i + (e & 15);
                const int t = 32 * wt + 16 * j + (e >> 4);
                if (r < rows && t < nt) {
                    y[(size_t)tokens.y_row(t0 + t) * ldy + r] = stage[e] + (bias ? bias[r] : 0.0f);
                }
            }
            __syncwarp();
        }
}

#define DEFINE_MMA_KERNELS(name, F)                                                            \
    extern "C" __global__ void __launch_bounds__(MMA_WARPS * 32) mma_##name(                   \
        const u8* w, long long row_bytes, const float* x, int ldx, float* y, int ldy,          \
        const float* bias, int rows, int cols, int n) {                                        \
        const int t0 = blockIdx.y * MMA_TOKENS;                                                \
        mma_tile<F>(w, row_bytes, x, ldx, y, ldy, bias, rows, cols, MmaTokens{nullptr, 1}, t0, \
                    min(MMA_TOKENS, n - t0));                                                  \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(MMA_WARPS * 32) mma_id_##name(                \
        const u8* w, long long expert_bytes, long long row_bytes, const int* counts,           \
        const int* lists, int max_slots, int groups, const float* x, int ldx, int x_div,       \
        float* y, int ldy, const float* bias, int rows, int cols) {                            \
        const int e = blockIdx.y / groups, t0 = (blockIdx.y % groups) * MMA_TOKENS;            \
        const int nt = min(MMA_TOKENS, counts[e] - t0);                                        \
        if (nt <= 0) return;                                                                   \
        mma_tile<F>(w + (size_t)e * (size_t)expert_bytes, row_bytes, x, ldx, y, ldy,           \
                    bias ? bias + (size_t)e * rows : nullptr, rows, cols,                      \
                    MmaTokens{lists + (size_t)e * max_slots, x_div}, t0, nt);                  \
    }

// BEGIN GENERATED from GpuType::ALL (src/kernels/mod.rs), the formats with tensor-core
// kernels, by the test `mma_kernel_instantiations_follow_the_type_list`, which rewrites what
// lies between these markers when the list changes. Do not edit.
DEFINE_MMA_KERNELS(q4_0, fmt_q4_0)
DEFINE_MMA_KERNELS(q4_1, fmt_q4_1)
DEFINE_MMA_KERNELS(q5_0, fmt_q5_0)
DEFINE_MMA_KERNELS(q5_1, fmt_q5_1)
DEFINE_MMA_KERNELS(q8_0, fmt_q8_0)
DEFINE_MMA_KERNELS(mxfp4, fmt_mxfp4)
DEFINE_MMA_KERNELS(q2_k, fmt_q2_k)
DEFINE_MMA_KERNELS(q3_k, fmt_q3_k)
DEFINE_MMA_KERNELS(q4_k, fmt_q4_k)
DEFINE_MMA_KERNELS(q5_k, fmt_q5_k)
DEFINE_MMA_KERNELS(q6_k, fmt_q6_k)
DEFINE_MMA_KERNELS(iq1_s, fmt_iq1_s)
DEFINE_MMA_KERNELS(iq1_m, fmt_iq1_m)
DEFINE_MMA_KERNELS(iq2_xxs, fmt_iq2_xxs)
DEFINE_MMA_KERNELS(iq2_xs, fmt_iq2_xs)
DEFINE_MMA_KERNELS(iq2_s, fmt_iq2_s)
DEFINE_MMA_KERNELS(iq3_xxs, fmt_iq3_xxs)
DEFINE_MMA_KERNELS(iq3_s, fmt_iq3_s)
DEFINE_MMA_KERNELS(iq4_nl, fmt_iq4_nl)
DEFINE_MMA_KERNELS(iq4_xs, fmt_iq4_xs)
DEFINE_MMA_KERNELS(tq1_0, fmt_tq1_0)
DEFINE_MMA_KERNELS(tq2_0, fmt_tq2_0)
// END GENERATED
