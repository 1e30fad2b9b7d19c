// The i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS) and the
// ternary types (TQ1_0, TQ2_0). Every value of these formats is a scale times a small integer,
// so each reader gives one 32-element chunk as int8 codes, 8 words (codes 4i..4i+3 in word i),
// and a scale per half: x[j] = a[j / 16] * c[j]. That is the form the integer matvec takes
// (matvec_q8_1.cu, with offsets b = 0), and deq32 follows from it (int_coded). The grids and
// tables are generated from rinfer-kernels' (codebooks.rs); the layouts are ggml's.
//
// Rounding: the CPU reference computes each value as one f32 product of a scale and a small
// integer, and so does deq32. IQ1's grid ± 1/8 is coded as 8 · grid ± 1 with the scale / 8:
// the same product scaled by 2^-3, exact in f32, so the values match the CPU's bit for bit.

// deq32 of a format that gives codes: x[j] = a[j / 16] * c[j].
template <typename F>
struct int_coded {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        int c[8];
        float a[2], b[2];
        F::codes(row, chunk, c, a, b);
        for (int j = 0; j < 32; j++) {
            v[j] = a[j >> 4] * (float)(i8)(u8)((u32)c[j >> 2] >> (8 * (j & 3)));
        }
    }
};

// Four ints, each taken as an int8, packed into a word (the first at bits 0..7).
__device__ __forceinline__ int pack_i8x4(int q0, int q1, int q2, int q3) {
    return (int)((u32)(u8)q0 | ((u32)(u8)q1 << 8) | ((u32)(u8)q2 << 16) | ((u32)(u8)q3 << 24));
}

// The eight magnitudes of a grid entry (byte j is coordinate j), negated where bit j of
// `signs` is set, as two code words.
__device__ __forceinline__ void signed_group(u64 grid, u32 signs, int* c) {
    int q[8];
    for (int j = 0; j < 8; j++) {
        const int m = (int)((grid >> (8 * j)) & 0xff);
        q[j] = ((signs >> j) & 1) ? -m : m;
    }
    c[0] = pack_i8x4(q[0], q[1], q[2], q[3]);
    c[1] = pack_i8x4(q[4], q[5], q[6], q[7]);
}

// The eight values −1, 0, 1 of an IQ1 grid entry (bytes 0xff, 0, 1) shifted by delta / 8, as
// the codes 8 · g + delta.
__device__ __forceinline__ void shifted_group(u64 grid, int delta, int* c) {
    int q[8];
    for (int j = 0; j < 8; j++) q[j] = 8 * (int)(i8)(u8)(grid >> (8 * j)) + delta;
    c[0] = pack_i8x4(q[0], q[1], q[2], q[3]);
    c[1] = pack_i8x4(q[4], q[5], q[6], q[7]);
}

// The codes of 32 values, value j the low nibble of qs[j] (j < 16) or the high nibble of
// qs[j - 16], each nibble an index into the IQ4_NL table.
__device__ __forceinline__ void iq4_codes(const u8* qs, int* c) {
    for (int i = 0; i < 4; i++) {
        const u8* q = qs + 4 * i;
        const auto value = [](int nibble) { return (int)(i8)kvalues_iq4nl[nibble]; };
        c[i] = pack_i8x4(value(q[0] & 15), value(q[1] & 15), value(q[2] & 15), value(q[3] & 15));
        c[i + 4] = pack_i8x4(value(q[0] >> 4), value(q[1] >> 4), value(q[2] >> 4), value(q[3] >> 4));
    }
}

// IQ1_S: f16 d, 32 low index bytes, per sub-block a u16 of the high index bits (3 per group),
// the scale s (bits 12..14) and the shift's sign (bit 15); x = d (2s + 1) (grid ± 1/8).
struct fmt_iq1_s : super_blocks<50>, int_coded<fmt_iq1_s> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        const u32 qh = load_u16(blk + 34 + 2 * ib);
        const float dl = half_to_float(load_u16(blk)) * (float)(2 * ((qh >> 12) & 7) + 1);
        const int delta = (qh & 0x8000) ? -1 : 1;
        for (int l = 0; l < 4; l++) {
            const int index = blk[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
            shifted_group(iq1s_grid[index], delta, c + 2 * l);
        }
        one_scale(dl * 0.125f, a, b);
    }
};

// IQ1_M: 32 low index bytes, per group a nibble (high index bits, shift sign in bit 3), four
// u16 scale words (3-bit scale s per 16 values; their top nibbles the f16 d);
// x = d (2s + 1) (grid ± 1/8).
struct fmt_iq1_m : super_blocks<56>, int_coded<fmt_iq1_m> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        u32 d_bits = 0;
        for (int k = 0; k < 4; k++) d_bits |= (u32)(load_u16(blk + 48 + 2 * k) >> 12) << (4 * k);
        const float d = half_to_float((u16)d_bits);
        const u32 scales = load_u16(blk + 48 + 2 * (ib >> 1));
        for (int half = 0; half < 2; half++) {
            const int s = (scales >> (3 * ((2 * ib + half) & 3))) & 7;
            a[half] = d * (float)(2 * s + 1) * 0.125f;
            b[half] = 0.0f;
        }
        for (int l = 0; l < 4; l++) {
            const int g = 4 * ib + l;
            const int nibble = (blk[32 + g / 2] >> (4 * (g & 1))) & 15;
            const int index = blk[g] | ((nibble & 7) << 8);
            shifted_group(iq1s_grid[index], (nibble & 8) ? -1 : 1, c + 2 * l);
        }
    }
};

// IQ2_XXS: f16 d, per sub-block four grid index bytes and a word of four 7-bit sign groups
// and the scale s (bits 28..31); x = d (0.5 + s) / 4 · grid · sign.
struct fmt_iq2_xxs : super_blocks<66>, int_coded<fmt_iq2_xxs> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const u8* q = blk + 2 + 8 * (chunk & 7);
        const u32 signs = load_u32(q + 4);
        for (int l = 0; l < 4; l++) {
            signed_group(iq2xxs_grid[q[l]], ksigns_iq2xs[(signs >> (7 * l)) & 127], c + 2 * l);
        }
        one_scale(half_to_float(load_u16(blk)) * (0.5f + (float)(signs >> 28)) * 0.25f, a, b);
    }
};

// The scales of IQ2_XS and IQ2_S: nibble h of `scales` (a byte per sub-block) is the scale s
// of values 16h..16h+15; x = d (0.5 + s) / 4 · grid · sign.
__device__ __forceinline__ void iq2_half_scales(float d, u8 scales, float* a, float* b) {
    a[0] = d * (0.5f + (float)(scales & 15)) * 0.25f;
    a[1] = d * (0.5f + (float)(scales >> 4)) * 0.25f;
    b[0] = b[1] = 0.0f;
}

// IQ2_XS: f16 d, per group of eight a u16 (9-bit grid index, 7-bit sign group), per
// sub-block a byte of two 4-bit scales.
struct fmt_iq2_xs : super_blocks<74>, int_coded<fmt_iq2_xs> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        for (int l = 0; l < 4; l++) {
            const u32 q = load_u16(blk + 2 + 8 * ib + 2 * l);
            signed_group(iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9], c + 2 * l);
        }
        iq2_half_scales(half_to_float(load_u16(blk)), blk[66 + ib], a, b);
    }
};

// IQ2_S: f16 d, 32 low index bytes, 32 sign bytes, per sub-block a byte of high index bits
// (2 per group) and a byte of two 4-bit scales.
struct fmt_iq2_s : super_blocks<82>, int_coded<fmt_iq2_s> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        for (int l = 0; l < 4; l++) {
            const int g = 4 * ib + l;
            const int index = blk[2 + g] | (((blk[66 + ib] >> (2 * l)) & 3) << 8);
            signed_group(iq2s_grid[index], blk[34 + g], c + 2 * l);
        }
        iq2_half_scales(half_to_float(load_u16(blk)), blk[74 + ib], a, b);
    }
};

// IQ3_XXS: f16 d, 64 grid index bytes (four magnitudes each), per sub-block a word of four
// 7-bit sign groups and the scale s (bits 28..31); x = d (0.5 + s) / 2 · grid · sign.
struct fmt_iq3_xxs : super_blocks<98>, int_coded<fmt_iq3_xxs> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        const u8* q = blk + 2 + 8 * ib;
        const u32 signs = load_u32(blk + 66 + 4 * ib);
        for (int l = 0; l < 4; l++) {
            const u64 grid = iq3xxs_grid[q[2 * l]] | ((u64)iq3xxs_grid[q[2 * l + 1]] << 32);
            signed_group(grid, ksigns_iq2xs[(signs >> (7 * l)) & 127], c + 2 * l);
        }
        one_scale(half_to_float(load_u16(blk)) * (0.5f + (float)(signs >> 28)) * 0.5f, a, b);
    }
};

// IQ3_S: f16 d, 64 low index bytes, per sub-block a byte of high index bits (one per four
// values), 32 sign bytes, per two sub-blocks a byte of 4-bit scales; x = d (1 + 2s) · grid ·
// sign.
struct fmt_iq3_s : super_blocks<110>, int_coded<fmt_iq3_s> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        const u8* q = blk + 2 + 8 * ib;
        const u32 high = blk[66 + ib];
        for (int l = 0; l < 4; l++) {
            const u64 lo = iq3s_grid[q[2 * l] | (((high >> (2 * l)) & 1) << 8)];
            const u64 hi = iq3s_grid[q[2 * l + 1] | (((high >> (2 * l + 1)) & 1) << 8)];
            signed_group(lo | (hi << 32), blk[74 + 4 * ib + l], c + 2 * l);
        }
        const int s = (blk[106 + (ib >> 1)] >> (4 * (ib & 1))) & 15;
        one_scale(half_to_float(load_u16(blk)) * (float)(1 + 2 * s), a, b);
    }
};

// IQ4_NL: f16 d, 16 bytes of nibbles indexing the table; x = d · kvalues[q].
struct fmt_iq4_nl : blocks32<18>, int_coded<fmt_iq4_nl> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        iq4_codes(blk + 2, c);
        one_scale(half_to_float(load_u16(blk)), a, b);
    }
};

// IQ4_XS: f16 d, a u16 of the scales' high 2 bits, 4 bytes of their low nibbles, then per
// sub-block 16 bytes as IQ4_NL; x = d (ls − 32) · kvalues[q].
struct fmt_iq4_xs : super_blocks<136>, int_coded<fmt_iq4_xs> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int ib = chunk & 7;
        const int low = (blk[4 + (ib >> 1)] >> (4 * (ib & 1))) & 15;
        const int high = (load_u16(blk + 2) >> (2 * ib)) & 3;
        iq4_codes(blk + 8 + 16 * ib, c);
        one_scale(half_to_float(load_u16(blk)) * (float)((low | (high << 4)) - 32), a, b);
    }
};

// TQ1_0: 48 bytes of five trits, 4 bytes of four, f16 d; trit n of byte q is
// ⌊3 · (q · 3^n mod 256) / 256⌋ and x = d (trit − 1). Values 32n + m are trit n of byte m
// (m < 32), 160 + 16n + m trit n of byte 32 + m, 240 + 4n + m trit n of byte 48 + m.
struct fmt_tq1_0 : super_blocks<54>, int_coded<fmt_tq1_0> {
    __device__ static int value(const u8* blk, int v) {
        int q, n;
        if (v < 160) {
            q = blk[v & 31], n = v >> 5;
        } else if (v < 240) {
            q = blk[32 + ((v - 160) & 15)], n = (v - 160) >> 4;
        } else {
            q = blk[48 + ((v - 240) & 3)], n = (v - 240) >> 2;
        }
        const int pow3[5] = {1, 3, 9, 27, 81};
        return ((((q * pow3[n]) & 0xff) * 3) >> 8) - 1;
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int v0 = 32 * (chunk & 7);
        for (int i = 0; i < 8; i++) {
            const int v = v0 + 4 * i;
            c[i] = pack_i8x4(value(blk, v), value(blk, v + 1), value(blk, v + 2), value(blk, v + 3));
        }
        one_scale(half_to_float(load_u16(blk + 52)), a, b);
    }
};

// TQ2_0: 64 bytes of 2-bit codes q, f16 d; value 128h + 32l + k is bits 2l of byte 32h + k,
// x = d (q − 1).
struct fmt_tq2_0 : super_blocks<66>, int_coded<fmt_tq2_0> {
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const u8* q = blk + 32 * ((chunk & 7) >> 2);
        const int shift = 2 * (chunk & 3);
        for (int i = 0; i < 8; i++) {
            const auto value = [&](int k) { return ((q[4 * i + k] >> shift) & 3) - 1; };
            c[i] = pack_i8x4(value(0), value(1), value(2), value(3));
        }
        one_scale(half_to_float(load_u16(blk + 64)), a, b);
    }
};
