// Decode matvec at memory speed: the activation rows quantized once to q8_1, then an integer
// dot product (dp4a) of each weight block's codes with them, as llama.cpp's mmvq does.
//
// quantize_q8_1 turns each 32-element block of an f32 row into 32 int8 codes q = round(x / d)
// with d = max|x| / 127, and a meta record {d, d * sum(q[0..16]), d * sum(q[16..32]), 0}: the
// q8_1 row is `cols` bytes of codes, its metas `cols / 32` float4s.
//
// Each weight format gives, for one 32-element chunk of a row, its codes as 8 packed int8
// words (codes 4i..4i+3 in word i) and an affine map per half: w[j] = a[j / 16] * c[j] +
// b[j / 16]. The chunk's dot with the activations is then
//   Σ_j w[j] x[j] = d * (a0 * Σ_{j<16} c q + a1 * Σ_{j≥16} c q) + b0 * S0 + b1 * S1,
// with the integer sums by dp4a and S0, S1 the meta's scaled code sums. The per-half form
// covers every block format (scales per 16 or per 32 elements, offsets or mins or none).
//
// matvec_q8_1_<fmt>: MMVQ_ROWS rows per warp, MMVQ_WARPS warps per block, lanes striding over
// the chunks, up to MMVQ_TOKENS activation rows per launch (each weight chunk is read once
// for all of them); matvec_q8_1_<fmt> is the one-token instantiation, matvec_batch_q8_1_<fmt>
// the one for 2 to MMVQ_TOKENS. A launch multiplies up to three matrices of the format and of
// one width whose outputs are adjacent columns of y (q, k and v; gate and up), as one matrix
// of their rows stacked (Q8_1Matrices), so that their products take one launch. Weights are read with the widest loads their alignment allows:
// 128-bit for Q4_K and Q5_K (16-byte aligned blocks), 32-bit words for the 4-byte-aligned
// activation codes, 16-bit pairs for the 2-byte-aligned formats.

#define MMVQ_WARPS 4
#define MMVQ_ROWS 2
#define MMVQ_TOKENS 8
#define Q8_1_BLOCKS_PER_CTA 4

// One q8_1 block per warp, lane j its element j; grid (ceil(cols / 32 / 4), n).
extern "C" __global__ void __launch_bounds__(Q8_1_BLOCKS_PER_CTA * 32) quantize_q8_1(
    const float* __restrict__ x, int ldx, int cols, i8* __restrict__ xq,
    float* __restrict__ meta) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int block = blockIdx.x * Q8_1_BLOCKS_PER_CTA + warp, t = blockIdx.y;
    if (block >= (cols >> 5)) return;
    quantize_q8_1_block(x[(size_t)t * ldx + block * 32 + lane], lane,
                        xq + (size_t)t * cols + block * 32,
                        meta + 4 * ((size_t)t * (cols >> 5) + block));
}

// The rows of a launch: rows [0, split1) are w0's, [split1, split2) w1's, the rest w2's, each
// matrix row_bytes a row, with its bias (or none).
struct Q8_1Matrices {
    const u8* w0;
    const u8* w1;
    const u8* w2;
    long long row_bytes;
    int split1, split2;
    const float* b0;
    const float* b1;
    const float* b2;

    // Row r's weights, and its bias (0 without one).
    __device__ __forceinline__ const u8* row(int r) const {
        const u8* w = r < split1 ? w0 : r < split2 ? w1 : w2;
        const int first = r < split1 ? 0 : r < split2 ? split1 : split2;
        return w + (size_t)(r - first) * (size_t)row_bytes;
    }
    __device__ __forceinline__ float bias(int r) const {
        const float* b = r < split1 ? b0 : r < split2 ? b1 : b2;
        const int first = r < split1 ? 0 : r < split2 ? split1 : split2;
        return b ? b[r - first] : 0.0f;
    }
};

// y[t, r] = W[r] · dequant(xq[t]) + b[r] for the NT (≤ n) activation rows t, W the launch's
// matrices.
template <typename F, int NT>
__device__ __forceinline__ void matvec_q8_1_rows(
    const Q8_1Matrices& m, const i8* __restrict__ xq, const float* __restrict__ meta,
    float* __restrict__ y, int ldy, int rows, int cols, int n) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * MMVQ_WARPS + warp) * MMVQ_ROWS;
    if (r0 >= rows) return;
    const u8* w[MMVQ_ROWS];
#pragma unroll
    for (int i = 0; i < MMVQ_ROWS; i++) w[i] = r0 + i < rows ? m.row(r0 + i) : nullptr;
    const int nt = min(NT, n);
    const int chunks = cols >> 5;
    float acc[MMVQ_ROWS][NT];
#pragma unroll
    for (int i = 0; i < MMVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;
    for (int chunk = lane; chunk < chunks; chunk += 32) {
#pragma unroll
        for (int i = 0; i < MMVQ_ROWS; i++) {
            if (r0 + i >= rows) break;
            int c[8];
            float a[2], b[2];
            F::codes(w[i], chunk, c, a, b);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t < nt) {
                    const u8* xt = (const u8*)xq + (size_t)t * cols + 32 * chunk;
                    int q[8];
                    load_int4(xt, q);
                    load_int4(xt + 16, q + 4);
                    const float4 m = *(const float4*)(meta + 4 * ((size_t)t * chunks + chunk));
                    int s0 = 0, s1 = 0;
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        s0 = __dp4a(c[k], q[k], s0);
                        s1 = __dp4a(c[k + 4], q[k + 4], s1);
                    }
                    acc[i][t] += m.x * (a[0] * (float)s0 + a[1] * (float)s1) + b[0] * m.y +
                                 b[1] * m.z;
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < MMVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = warp_sum(acc[i][t]);
    if (lane == 0) {
        for (int i = 0; i < MMVQ_ROWS && r0 + i < rows; i++) {
            const float bi = m.bias(r0 + i);
            for (int t = 0; t < nt; t++) y[(size_t)t * ldy + r0 + i] = acc[i][t] + bi;
        }
    }
}

// Both take the launch's matrices (Q8_1Matrices' fields in order), the q8_1 rows, then the
// outputs and the sizes: `rows` in all, `cols` wide, `n` activation rows.
#define DEFINE_Q8_1_KERNELS(name, F)                                                             \
    extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) matvec_q8_1_##name(            \
        const u8* w0, const u8* w1, const u8* w2, long long row_bytes, int split1, int split2,   \
        const float* b0, const float* b1, const float* b2, const i8* xq, const float* meta,      \
        float* y, int ldy, int rows, int cols, int n) {                                          \
        const Q8_1Matrices m{w0, w1, w2, row_bytes, split1, split2, b0, b1, b2};                 \
        matvec_q8_1_rows<F, 1>(m, xq, meta, y, ldy, rows, cols, n);                              \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) matvec_batch_q8_1_##name(      \
        const u8* w0, const u8* w1, const u8* w2, long long row_bytes, int split1, int split2,   \
        const float* b0, const float* b1, const float* b2, const i8* xq, const float* meta,      \
        float* y, int ldy, int rows, int cols, int n) {                                          \
        const Q8_1Matrices m{w0, w1, w2, row_bytes, split1, split2, b0, b1, b2};                 \
        matvec_q8_1_rows<F, MMVQ_TOKENS>(m, xq, meta, y, ldy, rows, cols, n);                    \
    }

DEFINE_Q8_1_KERNELS(q4_0, fmt_q4_0)
DEFINE_Q8_1_KERNELS(q4_1, fmt_q4_1)
DEFINE_Q8_1_KERNELS(q5_0, fmt_q5_0)
DEFINE_Q8_1_KERNELS(q5_1, fmt_q5_1)
DEFINE_Q8_1_KERNELS(q8_0, fmt_q8_0)
DEFINE_Q8_1_KERNELS(mxfp4, fmt_mxfp4)
DEFINE_Q8_1_KERNELS(q2_k, fmt_q2_k)
DEFINE_Q8_1_KERNELS(q3_k, fmt_q3_k)
DEFINE_Q8_1_KERNELS(q4_k, fmt_q4_k)
DEFINE_Q8_1_KERNELS(q5_k, fmt_q5_k)
DEFINE_Q8_1_KERNELS(q6_k, fmt_q6_k)
// The i-quants and the ternary types: their readers (dequant_iq.cuh) give the codes.
DEFINE_Q8_1_KERNELS(iq1_s, fmt_iq1_s)
DEFINE_Q8_1_KERNELS(iq1_m, fmt_iq1_m)
DEFINE_Q8_1_KERNELS(iq2_xxs, fmt_iq2_xxs)
DEFINE_Q8_1_KERNELS(iq2_xs, fmt_iq2_xs)
DEFINE_Q8_1_KERNELS(iq2_s, fmt_iq2_s)
DEFINE_Q8_1_KERNELS(iq3_xxs, fmt_iq3_xxs)
DEFINE_Q8_1_KERNELS(iq3_s, fmt_iq3_s)
DEFINE_Q8_1_KERNELS(iq4_nl, fmt_iq4_nl)
DEFINE_Q8_1_KERNELS(iq4_xs, fmt_iq4_xs)
DEFINE_Q8_1_KERNELS(tq1_0, fmt_tq1_0)
DEFINE_Q8_1_KERNELS(tq2_0, fmt_tq2_0)
