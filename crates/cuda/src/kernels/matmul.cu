// y[t, r] = W[r] · x[t] + b[r]: one warp per weight row, lanes striding over 32-element
// chunks, the weights dequantized in registers once and dotted with up to NT token rows.
// matvec_* (NT = 1) is the decode kernel; matmul_* (NT = MATMUL_TOKENS) serves prefill, with
// grid.y covering the tokens in groups of NT. Activations stay f32 (no activation quantization),
// so every weight format needs only its deq32. matvec_id_* and matmul_id_* are the
// mixture-of-experts variants, the expert read from device memory: matvec_id_* (decode) runs
// one routed (token, expert) slot per grid.y; matmul_id_* (prefill) runs, per grid.y, up to
// MATMUL_TOKENS of the slots one expert received (moe_group's lists), so each expert's weights
// are read once per group of its tokens.

#define MATMUL_WARPS 4
#define MATMUL_TOKENS 8

// The 32 dequantized weights v dotted with the 32 activations at x (16-byte aligned), four at a
// time.
__device__ __forceinline__ float dot32(const float* v, const float* x) {
    const float4* xp = (const float4*)x;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float4 xv = xp[i];
        s += v[4 * i] * xv.x + v[4 * i + 1] * xv.y + v[4 * i + 2] * xv.z + v[4 * i + 3] * xv.w;
    }
    return s;
}

// acc[t] = the weight row `row` (`cols` values) dotted with the activation row x_row(t), for
// the first nt of NT tokens, summed over the warp: lane `lane` takes every 32nd chunk from
// chunk `lane`, dequantizes it once and dots it with each token's.
template <typename F, int NT, typename XRow>
__device__ __forceinline__ void dot_row(const u8* row, int cols, int nt, int lane, XRow x_row,
                                        float* acc) {
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    const int chunks = cols >> 5;
    for (int c = lane; c < chunks; c += 32) {
        float v[32];
        F::deq32(row, c, v);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) acc[t] += dot32(v, x_row(t) + c * 32);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = warp_sum(acc[t]);
}

template <typename F, int NT>
__device__ __forceinline__ void matmul_rows(
    const u8* __restrict__ w, long long row_bytes, const float* __restrict__ x, int ldx,
    float* __restrict__ y, int ldy, const float* __restrict__ bias, int rows, int cols, int n,
    int t0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = blockIdx.x * MATMUL_WARPS + warp;
    if (r >= rows) return;
    const int nt = min(NT, n - t0);
    float acc[NT];
    dot_row<F, NT>(w + (size_t)r * (size_t)row_bytes, cols, nt, lane,
                   [&](int t) { return x + (size_t)(t0 + t) * ldx; }, acc);
    if (lane == 0) {
        const float b = bias ? bias[r] : 0.0f;
        for (int t = 0; t < nt; t++) y[(size_t)(t0 + t) * ldy + r] = acc[t] + b;
    }
}

// Slot s = blockIdx.y of the routed slots: y[s] = W_e · x[s / x_div] + b_e with e = ids[s],
// expert e's rows at w + e * expert_bytes and its bias at bias + e * rows.
template <typename F>
__device__ __forceinline__ void matvec_by_id(
    const u8* __restrict__ w, long long expert_bytes, long long row_bytes,
    const int* __restrict__ ids, const float* __restrict__ x, int ldx, int x_div,
    float* __restrict__ y, int ldy, const float* __restrict__ bias, int rows, int cols) {
    const int slot = blockIdx.y;
    const int e = ids[slot];
    const float* b = bias ? bias + (size_t)e * rows : nullptr;
    matmul_rows<F, 1>(w + (size_t)e * (size_t)expert_bytes, row_bytes,
                      x + (size_t)(slot / x_div) * ldx, ldx, y + (size_t)slot * ldy, ldy, b, rows,
                      cols, 1, 0);
}

// grid.y = expert * groups + group: slots lists[e * max_slots + group * MATMUL_TOKENS ...] of
// the counts[e] expert e received, y[s] = W_e · x[s / x_div] + b_e for each.
template <typename F>
__device__ __forceinline__ void matmul_by_id(
    const u8* __restrict__ w, long long expert_bytes, long long row_bytes,
    const int* __restrict__ counts, const int* __restrict__ lists, int max_slots, int groups,
    const float* __restrict__ x, int ldx, int x_div, float* __restrict__ y, int ldy,
    const float* __restrict__ bias, int rows, int cols) {
    const int e = blockIdx.y / groups, t0 = (blockIdx.y % groups) * MATMUL_TOKENS;
    const int nt = min(MATMUL_TOKENS, counts[e] - t0);
    if (nt <= 0) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = blockIdx.x * MATMUL_WARPS + warp;
    if (r >= rows) return;
    const int* slots = lists + (size_t)e * max_slots + t0;
    const u8* row = w + (size_t)e * (size_t)expert_bytes + (size_t)r * (size_t)row_bytes;
    float acc[MATMUL_TOKENS];
    dot_row<F, MATMUL_TOKENS>(row, cols, nt, lane,
                              [&](int t) { return x + (size_t)(slots[t] / x_div) * ldx; }, acc);
    if (lane == 0) {
        const float b = bias ? bias[(size_t)e * rows + r] : 0.0f;
        for (int t = 0; t < nt; t++) y[(size_t)slots[t] * ldy + r] = acc[t] + b;
    }
}

// out[i] = scale * W[ids[i]] (accumulate: out[i] += W[ids[i]]); one block per row.
template <typename F>
__device__ __forceinline__ void get_rows(
    const u8* __restrict__ w, long long row_bytes, const int* __restrict__ ids, int cols,
    float* __restrict__ out, int ldo, float scale, int accumulate) {
    const u8* row = w + (size_t)ids[blockIdx.x] * (size_t)row_bytes;
    float* o = out + (size_t)blockIdx.x * ldo;
    for (int c = threadIdx.x; c < (cols >> 5); c += blockDim.x) {
        float v[32];
        F::deq32(row, c, v);
        for (int i = 0; i < 32; i++) {
            if (accumulate) {
                o[c * 32 + i] += v[i];
            } else {
                o[c * 32 + i] = scale == 1.0f ? v[i] : v[i] * scale;
            }
        }
    }
}

#define DEFINE_WEIGHT_KERNELS(name, F)                                                         \
    extern "C" __global__ void __launch_bounds__(MATMUL_WARPS * 32) matvec_##name(             \
        const u8* w, long long row_bytes, const float* x, int ldx, float* y, int ldy,          \
        const float* bias, int rows, int cols, int n) {                                        \
        matmul_rows<F, 1>(w, row_bytes, x, ldx, y, ldy, bias, rows, cols, n, 0);               \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(MATMUL_WARPS * 32) matmul_##name(             \
        const u8* w, long long row_bytes, const float* x, int ldx, float* y, int ldy,          \
        const float* bias, int rows, int cols, int n) {                                        \
        matmul_rows<F, MATMUL_TOKENS>(w, row_bytes, x, ldx, y, ldy, bias, rows, cols, n,       \
                                      blockIdx.y * MATMUL_TOKENS);                             \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(MATMUL_WARPS * 32) matvec_id_##name(          \
        const u8* w, long long expert_bytes, long long row_bytes, const int* ids,              \
        const float* x, int ldx, int x_div, float* y, int ldy, const float* bias, int rows,    \
        int cols) {                                                                            \
        matvec_by_id<F>(w, expert_bytes, row_bytes, ids, x, ldx, x_div, y, ldy, bias, rows,    \
                        cols);                                                                 \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(MATMUL_WARPS * 32) matmul_id_##name(          \
        const u8* w, long long expert_bytes, long long row_bytes, const int* counts,           \
        const int* lists, int max_slots, int groups, const float* x, int ldx, int x_div,       \
        float* y, int ldy, const float* bias, int rows, int cols) {                            \
        matmul_by_id<F>(w, expert_bytes, row_bytes, counts, lists, max_slots, groups, x, ldx,  \
                        x_div, y, ldy, bias, rows, cols);                                      \
    }                                                                                          \
    extern "C" __global__ void get_rows_##name(const u8* w, long long row_bytes,               \
                                               const int* ids, int cols, float* out, int ldo,  \
                                               float scale, int accumulate) {                  \
        get_rows<F>(w, row_bytes, ids, cols, out, ldo, scale, accumulate);                     \
    }

// BEGIN GENERATED from GpuType::ALL (src/kernels/mod.rs) by the test
// `weight_kernel_instantiations_follow_the_type_list`, which rewrites what lies between
// these markers when the list changes. Do not edit.
DEFINE_WEIGHT_KERNELS(f32, fmt_f32)
DEFINE_WEIGHT_KERNELS(f16, fmt_f16)
DEFINE_WEIGHT_KERNELS(bf16, fmt_bf16)
DEFINE_WEIGHT_KERNELS(q4_0, fmt_q4_0)
DEFINE_WEIGHT_KERNELS(q4_1, fmt_q4_1)
DEFINE_WEIGHT_KERNELS(q5_0, fmt_q5_0)
DEFINE_WEIGHT_KERNELS(q5_1, fmt_q5_1)
DEFINE_WEIGHT_KERNELS(q8_0, fmt_q8_0)
DEFINE_WEIGHT_KERNELS(mxfp4, fmt_mxfp4)
DEFINE_WEIGHT_KERNELS(q2_k, fmt_q2_k)
DEFINE_WEIGHT_KERNELS(q3_k, fmt_q3_k)
DEFINE_WEIGHT_KERNELS(q4_k, fmt_q4_k)
DEFINE_WEIGHT_KERNELS(q5_k, fmt_q5_k)
DEFINE_WEIGHT_KERNELS(q6_k, fmt_q6_k)
DEFINE_WEIGHT_KERNELS(iq1_s, fmt_iq1_s)
DEFINE_WEIGHT_KERNELS(iq1_m, fmt_iq1_m)
DEFINE_WEIGHT_KERNELS(iq2_xxs, fmt_iq2_xxs)
DEFINE_WEIGHT_KERNELS(iq2_xs, fmt_iq2_xs)
DEFINE_WEIGHT_KERNELS(iq2_s, fmt_iq2_s)
DEFINE_WEIGHT_KERNELS(iq3_xxs, fmt_iq3_xxs)
DEFINE_WEIGHT_KERNELS(iq3_s, fmt_iq3_s)
DEFINE_WEIGHT_KERNELS(iq4_nl, fmt_iq4_nl)
DEFINE_WEIGHT_KERNELS(iq4_xs, fmt_iq4_xs)
DEFINE_WEIGHT_KERNELS(tq1_0, fmt_tq1_0)
DEFINE_WEIGHT_KERNELS(tq2_0, fmt_tq2_0)
// END GENERATED
