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
// the one for 2 to MMVQ_TOKENS. Weights are read with the widest loads their alignment allows:
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
    const float v = x[(size_t)t * ldx + block * 32 + lane];
    float amax = fabsf(v);
    for (int offset = 16; offset > 0; offset >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    xq[(size_t)t * cols + block * 32 + lane] = (i8)q;
    // Sums of the codes of each half-warp (exact in f32).
    float sum = (float)q;
    for (int offset = 8; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float other = __shfl_xor_sync(0xffffffffu, sum, 16);
    if (lane == 0) {
        float* m = meta + 4 * ((size_t)t * (cols >> 5) + block);
        m[0] = d;
        m[1] = d * sum;
        m[2] = d * other;
        m[3] = 0.0f;
    }
}

// A 32-bit word of a 2-byte-aligned pointer, as two 16-bit loads.
__device__ __forceinline__ int load_int_b2(const u8* p) {
    const u16* h = (const u16*)p;
    return (int)((u32)h[0] | ((u32)h[1] << 16));
}

// Four 32-bit words of a 16-byte-aligned pointer, as one 128-bit load.
__device__ __forceinline__ void load_int4(const u8* p, int* out) {
    const int4 v = *(const int4*)p;
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
}

// The high bits of four consecutive elements (bits 0..3 of `bits`) moved to bit 4 of each byte.
__device__ __forceinline__ int spread_bit4(u32 bits) {
    return (int)(((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25));
}

// The codes of 16 bytes of nibbles: value j the low nibble of byte j (j < 16), value j + 16
// its high nibble.
__device__ __forceinline__ void nibble_codes(const u8* qs, int* c) {
    for (int i = 0; i < 4; i++) {
        const int v = load_int_b2(qs + 4 * i);
        c[i] = v & 0x0f0f0f0f;
        c[i + 4] = (v >> 4) & 0x0f0f0f0f;
    }
}

// The same for Q5_0 and Q5_1's five-bit codes: bit j of qh is bit 4 of value j.
__device__ __forceinline__ void five_bit_codes(const u8* qs, u32 qh, int* c) {
    nibble_codes(qs, c);
    for (int i = 0; i < 4; i++) {
        c[i] |= spread_bit4(qh >> (4 * i));
        c[i + 4] |= spread_bit4(qh >> (16 + 4 * i));
    }
}

struct q8_q4_0 {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q4_0::block(row, chunk);
        const float d = half_to_float(load_u16(blk));
        nibble_codes(blk + 2, c);
        one_scale_offset(d, -8.0f * d, a, b);
    }
};

struct q8_q4_1 {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q4_1::block(row, chunk);
        nibble_codes(blk + 4, c);
        one_scale_offset(half_to_float(load_u16(blk)), half_to_float(load_u16(blk + 2)), a, b);
    }
};

struct q8_q5_0 {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q5_0::block(row, chunk);
        const float d = half_to_float(load_u16(blk));
        five_bit_codes(blk + 6, (u32)load_int_b2(blk + 2), c);
        one_scale_offset(d, -16.0f * d, a, b);
    }
};

struct q8_q5_1 {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q5_1::block(row, chunk);
        five_bit_codes(blk + 8, (u32)load_int_b2(blk + 4), c);
        one_scale_offset(half_to_float(load_u16(blk)), half_to_float(load_u16(blk + 2)), a, b);
    }
};

struct q8_q8_0 {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q8_0::block(row, chunk);
        for (int i = 0; i < 8; i++) c[i] = load_int_b2(blk + 2 + 4 * i);
        one_scale(half_to_float(load_u16(blk)), a, b);
    }
};

// Q2_K: codes 0..3, per 16 elements w = d * (sc & 15) * c - dmin * (sc >> 4).
struct q8_q2_k {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q2_k::block(row, chunk);
        const int sub = chunk & 7, half = sub >> 2, j = sub & 3;
        const float d = half_to_float(load_u16(blk + 80));
        const float dmin = half_to_float(load_u16(blk + 82));
        const u8* q = blk + 16 + 32 * half;
        for (int i = 0; i < 8; i++) c[i] = (load_int_b2(q + 4 * i) >> (2 * j)) & 0x03030303;
        for (int part = 0; part < 2; part++) {
            const u8 sc = blk[8 * half + 2 * j + part];
            a[part] = d * (float)(sc & 0x0f);
            b[part] = -dmin * (float)(sc >> 4);
        }
    }
};

// Q3_K: codes 0..7 (the 2 low bits, plus 4 where the high bit is set), per 16 elements
// w = d * scale * (c - 4).
struct q8_q3_k {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q3_k::block(row, chunk);
        const int sub = chunk & 7, half = sub >> 2, j = sub & 3;
        const float d = half_to_float(load_u16(blk + 108));
        const u8* q = blk + 32 + 32 * half;
        const int bit = 4 * half + j;
        for (int i = 0; i < 8; i++) {
            const int low = (load_int_b2(q + 4 * i) >> (2 * j)) & 0x03030303;
            const int high = (load_int_b2(blk + 4 * i) >> bit) & 0x01010101;
            c[i] = low | (high << 2);
        }
        for (int part = 0; part < 2; part++) {
            a[part] = d * (float)fmt_q3_k::scale(blk + 96, 8 * half + 2 * j + part);
            b[part] = -4.0f * a[part];
        }
    }
};

// Q4_K and Q5_K: the nibbles of sub-block `sub` (low nibbles for even sub-blocks, high for
// odd) from the 128 bytes at qs as codes 0..15, per 32 elements w = d * sc * c - dmin * m.
__device__ __forceinline__ void nibble_codes_k4(const u8* blk, const u8* qs, int sub, int* c,
                                                float* a, float* b) {
    const int pair = sub >> 1, shift = 4 * (sub & 1);
    load_int4(qs + 32 * pair, c);
    load_int4(qs + 16 + 32 * pair, c + 4);
    for (int i = 0; i < 8; i++) c[i] = (c[i] >> shift) & 0x0f0f0f0f;
    float scale, min_value;
    sub_block_scale_min_k4(blk, sub, &scale, &min_value);
    one_scale_offset(scale, -min_value, a, b);
}

struct q8_q4_k {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q4_k::block(row, chunk);
        nibble_codes_k4(blk, blk + 16, chunk & 7, c, a, b);
    }
};

// Q5_K: Q4_K's nibbles plus a fifth bit (bit `sub` of each high-bit byte).
struct q8_q5_k {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q5_k::block(row, chunk);
        const int sub = chunk & 7;
        nibble_codes_k4(blk, blk + 48, sub, c, a, b);
        int high[8];
        load_int4(blk + 16, high);
        load_int4(blk + 32, high + 4);
        for (int i = 0; i < 8; i++) c[i] |= ((high[i] >> sub) & 0x01010101) << 4;
    }
};

// Q6_K: codes 0..63 (a nibble of ql and two bits of qh), per 16 elements
// w = d * sc * (c - 32).
struct q8_q6_k {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_q6_k::block(row, chunk);
        const int sub = chunk & 7, half = sub >> 2, group = sub & 3;
        const float d = half_to_float(load_u16(blk + 208));
        const u8* ql = blk + 64 * half + 32 * (group & 1);
        const u8* qh = blk + 128 + 32 * half;
        const int nibble = 4 * (group >> 1);
        for (int i = 0; i < 8; i++) {
            const int low = (load_int_b2(ql + 4 * i) >> nibble) & 0x0f0f0f0f;
            const int high = (load_int_b2(qh + 4 * i) >> (2 * group)) & 0x03030303;
            c[i] = low | (high << 4);
        }
        const i8* sc = (const i8*)(blk + 192) + 8 * half + 2 * group;
        for (int part = 0; part < 2; part++) {
            a[part] = d * (float)sc[part];
            b[part] = -32.0f * a[part];
        }
    }
};

// MXFP4: codes are the doubled E2M1 values (-12..12), w = 2^(e - 128) * c.
struct q8_mxfp4 {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = fmt_mxfp4::block(row, chunk);
        for (int i = 0; i < 4; i++) {
            u32 low = 0, high = 0;
            for (int k = 0; k < 4; k++) {
                const u8 q = blk[1 + 4 * i + k];
                low |= (u32)(u8)mxfp4_value(q & 0x0f) << (8 * k);
                high |= (u32)(u8)mxfp4_value(q >> 4) << (8 * k);
            }
            c[i] = (int)low;
            c[i + 4] = (int)high;
        }
        one_scale(e8m0_half_to_float(blk[0]), a, b);
    }
    __device__ static int mxfp4_value(int q) {
        const int magnitude[8] = {0, 1, 2, 3, 4, 6, 8, 12};
        return (q & 8) ? -magnitude[q & 7] : magnitude[q & 7];
    }
};

// y[t, r] = W[r] · dequant(xq[t]) + b[r] for the NT (≤ n) activation rows t.
template <typename F, int NT>
__device__ __forceinline__ void matvec_q8_1_rows(
    const u8* __restrict__ w, long long row_bytes, const i8* __restrict__ xq,
    const float* __restrict__ meta, float* __restrict__ y, int ldy,
    const float* __restrict__ bias, int rows, int cols, int n) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * MMVQ_WARPS + warp) * MMVQ_ROWS;
    if (r0 >= rows) return;
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
            F::codes(w + (size_t)(r0 + i) * (size_t)row_bytes, chunk, c, a, b);
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
            const float bi = bias ? bias[r0 + i] : 0.0f;
            for (int t = 0; t < nt; t++) y[(size_t)t * ldy + r0 + i] = acc[i][t] + bi;
        }
    }
}

#define DEFINE_Q8_1_KERNELS(name, F)                                                           \
    extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) matvec_q8_1_##name(          \
        const u8* w, long long row_bytes, const i8* xq, const float* meta, float* y, int ldy,  \
        const float* bias, int rows, int cols, int n) {                                        \
        matvec_q8_1_rows<F, 1>(w, row_bytes, xq, meta, y, ldy, bias, rows, cols, n);           \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) matvec_batch_q8_1_##name(    \
        const u8* w, long long row_bytes, const i8* xq, const float* meta, float* y, int ldy,  \
        const float* bias, int rows, int cols, int n) {                                        \
        matvec_q8_1_rows<F, MMVQ_TOKENS>(w, row_bytes, xq, meta, y, ldy, bias, rows, cols, n); \
    }

DEFINE_Q8_1_KERNELS(q4_0, q8_q4_0)
DEFINE_Q8_1_KERNELS(q4_1, q8_q4_1)
DEFINE_Q8_1_KERNELS(q5_0, q8_q5_0)
DEFINE_Q8_1_KERNELS(q5_1, q8_q5_1)
DEFINE_Q8_1_KERNELS(q8_0, q8_q8_0)
DEFINE_Q8_1_KERNELS(mxfp4, q8_mxfp4)
DEFINE_Q8_1_KERNELS(q2_k, q8_q2_k)
DEFINE_Q8_1_KERNELS(q3_k, q8_q3_k)
DEFINE_Q8_1_KERNELS(q4_k, q8_q4_k)
DEFINE_Q8_1_KERNELS(q5_k, q8_q5_k)
DEFINE_Q8_1_KERNELS(q6_k, q8_q6_k)
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
