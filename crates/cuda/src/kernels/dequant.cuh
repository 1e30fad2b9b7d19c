// Dequantization of one "chunk" (32 consecutive elements) of a weight row, per block format.
// Each format is a struct with its block size QK (elements), block bytes BYTES and deq32;
// the matmul and embedding kernels are templates over these structs. The layouts and the
// order of floating-point operations follow ggml's dequantize_row_* so that results match the
// CPU reference bit for bit.
//
// Each quantized format also gives `codes`: one chunk as 8 words of int8 codes (codes
// 4i..4i+3 in word i) and an affine map per half, w[j] = a[j / 16] * c[j] + b[j / 16], read
// with the widest loads the block's alignment allows. The q8_1 matvec takes the integer dot of
// the codes; the tensor-core matmul computes fmaf(a, c, b), which is deq32's value: deq32
// rounds once the same real number (a scale times an integer, less an offset that is exact),
// as the host checks of the tensor-core kernels confirm against deq32.

// The place of a chunk in a row of 32-value blocks of BYTES_ bytes: the chunk is a block.
template <int BYTES_>
struct blocks32 {
    static const int QK = 32;
    static const int BYTES = BYTES_;
    // The block of chunk `chunk` of `row`.
    __device__ static const u8* block(const u8* row, int chunk) { return row + chunk * BYTES; }
};

// The place of a chunk in a row of 256-value super-blocks of BYTES_ bytes: the chunk is
// sub-block `chunk & 7` of super-block `chunk >> 3`.
template <int BYTES_>
struct super_blocks {
    static const int QK = 256;
    static const int BYTES = BYTES_;
    // The super-block of chunk `chunk` of `row`.
    __device__ static const u8* block(const u8* row, int chunk) {
        return row + (chunk >> 3) * BYTES;
    }
};

// The 32 values of 16 bytes of nibbles: value j is value(low nibble of qs[j]) and value j + 16
// value(high nibble of qs[j]), j < 16.
template <typename Value>
__device__ __forceinline__ void deq_nibbles(const u8* qs, float* v, Value value) {
    for (int j = 0; j < 16; j++) {
        v[j] = value((int)(qs[j] & 0x0f));
        v[j + 16] = value((int)(qs[j] >> 4));
    }
}

// The same for Q5_0 and Q5_1's five-bit codes: bit j of qh is bit 4 of value j.
template <typename Value>
__device__ __forceinline__ void deq_five_bits(const u8* qs, u32 qh, float* v, Value value) {
    for (int j = 0; j < 16; j++) {
        const int h0 = ((qh >> j) << 4) & 0x10;
        const int h1 = (qh >> (j + 12)) & 0x10;
        v[j] = value((qs[j] & 0x0f) | h0);
        v[j + 16] = value((qs[j] >> 4) | h1);
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

// Both halves scaled by s, with the offset o.
__device__ __forceinline__ void one_scale_offset(float s, float o, float* a, float* b) {
    a[0] = a[1] = s;
    b[0] = b[1] = o;
}

// Both halves scaled by s, no offsets.
__device__ __forceinline__ void one_scale(float s, float* a, float* b) {
    one_scale_offset(s, 0.0f, a, b);
}

// The scale of an MXFP4 block from its E8M0 exponent e: 2^(e - 128), half of what E8M0 codes
// because the block's values are the E2M1 values doubled (ggml's GGML_E8M0_TO_FP32_HALF,
// subnormal for e < 2).
__device__ __forceinline__ float e8m0_half_to_float(u32 e) {
    return __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
}

// Unquantized rows: a chunk is 32 elements of Element::BYTES bytes, each widened by
// Element::load.
template <typename Element>
struct unquantized {
    static const int QK = 1;
    static const int BYTES = Element::BYTES;
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* p = row + chunk * 32 * BYTES;
        for (int i = 0; i < 32; i++) v[i] = Element::load(p + BYTES * i);
    }
};

struct f32_element {
    static const int BYTES = 4;
    __device__ static float load(const u8* p) { return __uint_as_float(load_u32(p)); }
};

struct f16_element {
    static const int BYTES = 2;
    __device__ static float load(const u8* p) { return half_to_float(load_u16(p)); }
};

struct bf16_element {
    static const int BYTES = 2;
    __device__ static float load(const u8* p) { return bf16_to_float(load_u16(p)); }
};

typedef unquantized<f32_element> fmt_f32;
typedef unquantized<f16_element> fmt_f16;
typedef unquantized<bf16_element> fmt_bf16;

// Q4_0: f16 d, 16 bytes of nibbles; x = (q - 8) * d.
struct fmt_q4_0 : blocks32<18> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const float d = half_to_float(load_u16(b));
        deq_nibbles(b + 2, v, [d](int q) { return (float)(q - 8) * d; });
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const float d = half_to_float(load_u16(blk));
        nibble_codes(blk + 2, c);
        one_scale_offset(d, -8.0f * d, a, b);
    }
};

// Q4_1: f16 d, f16 m, 16 bytes of nibbles; x = q * d + m.
struct fmt_q4_1 : blocks32<20> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const float d = half_to_float(load_u16(b));
        const float m = half_to_float(load_u16(b + 2));
        deq_nibbles(b + 4, v, [d, m](int q) { return (float)q * d + m; });
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        nibble_codes(blk + 4, c);
        one_scale_offset(half_to_float(load_u16(blk)), half_to_float(load_u16(blk + 2)), a, b);
    }
};

// Q5_0: f16 d, 32 high bits, 16 bytes of nibbles; x = (q - 16) * d.
struct fmt_q5_0 : blocks32<22> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const float d = half_to_float(load_u16(b));
        deq_five_bits(b + 6, load_u32(b + 2), v, [d](int q) { return (float)(q - 16) * d; });
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const float d = half_to_float(load_u16(blk));
        five_bit_codes(blk + 6, (u32)load_int_b2(blk + 2), c);
        one_scale_offset(d, -16.0f * d, a, b);
    }
};

// Q5_1: f16 d, f16 m, 32 high bits, 16 bytes of nibbles; x = q * d + m.
struct fmt_q5_1 : blocks32<24> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const float d = half_to_float(load_u16(b));
        const float m = half_to_float(load_u16(b + 2));
        deq_five_bits(b + 8, load_u32(b + 4), v, [d, m](int q) { return (float)q * d + m; });
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        five_bit_codes(blk + 8, (u32)load_int_b2(blk + 4), c);
        one_scale_offset(half_to_float(load_u16(blk)), half_to_float(load_u16(blk + 2)), a, b);
    }
};

// Q8_0: f16 d, 32 signed bytes; x = q * d.
struct fmt_q8_0 : blocks32<34> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const float d = half_to_float(load_u16(b));
        for (int j = 0; j < 32; j++) v[j] = (float)(i8)b[2 + j] * d;
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        for (int i = 0; i < 8; i++) c[i] = load_int_b2(blk + 2 + 4 * i);
        one_scale(half_to_float(load_u16(blk)), a, b);
    }
};

// MXFP4: E8M0 exponent e, 16 bytes of nibbles indexing the E2M1 values doubled;
// x = kvalues[q] * 2^(e - 128).
struct fmt_mxfp4 : blocks32<17> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const signed char kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        const u8* b = block(row, chunk);
        const float d = e8m0_half_to_float(b[0]);
        deq_nibbles(b + 1, v, [&](int q) { return (float)kvalues[q] * d; });
    }
    // MXFP4: codes are the doubled E2M1 values (-12..12), w = 2^(e - 128) * c.
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
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

// Q2_K: 16 scale/min bytes, 64 bytes of 2-bit codes, f16 d, f16 dmin.
struct fmt_q2_k : super_blocks<84> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const int sub = chunk & 7;
        const u8* scales = b;
        const float d = half_to_float(load_u16(b + 80));
        const float dmin = half_to_float(load_u16(b + 82));
        const int half = sub >> 2, j = sub & 3;
        const u8* q = b + 16 + 32 * half;
        const int shift = 2 * j;
        const int is = 8 * half + 2 * j;
        for (int part = 0; part < 2; part++) {
            const u8 sc = scales[is + part];
            const float dl = d * (float)(sc & 0x0f);
            const float ml = dmin * (float)(sc >> 4);
            for (int l = 0; l < 16; l++) {
                v[16 * part + l] = dl * (float)((q[16 * part + l] >> shift) & 3) - ml;
            }
        }
    }
    // Q2_K: codes 0..3, per 16 elements w = d * (sc & 15) * c - dmin * (sc >> 4).
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
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

// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit codes, 12 bytes of 6-bit scales, f16 d.
struct fmt_q3_k : super_blocks<110> {
    // The k-th 6-bit scale (0..15), unpacked as ggml's kmask dance does.
    __device__ static int scale(const u8* s, int k) {
        const int low = k < 8 ? (s[k] & 0x0f) : (s[k - 8] >> 4);
        const int high = (s[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
        return (low | (high << 4)) - 32;
    }
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const int sub = chunk & 7;
        const u8* hmask = b;
        const u8* scales = b + 96;
        const float d = half_to_float(load_u16(b + 108));
        const int half = sub >> 2, j = sub & 3;
        const u8* q = b + 32 + 32 * half;
        const int shift = 2 * j;
        const u8 m = (u8)(1u << (4 * half + j));
        const int is = 8 * half + 2 * j;
        for (int part = 0; part < 2; part++) {
            const float dl = d * (float)scale(scales, is + part);
            for (int l = 0; l < 16; l++) {
                const int idx = 16 * part + l;
                const int code = (int)((q[idx] >> shift) & 3) - ((hmask[idx] & m) ? 0 : 4);
                v[idx] = dl * (float)code;
            }
        }
    }
    // Q3_K: codes 0..7 (the 2 low bits, plus 4 where the high bit is set), per 16 elements
    // w = d * scale * (c - 4).
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
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
            a[part] = d * (float)scale(blk + 96, 8 * half + 2 * j + part);
            b[part] = -4.0f * a[part];
        }
    }
};

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block, byte(k) its k-th scale
// byte.
template <typename Byte>
__device__ __forceinline__ void scale_min_k4(int j, Byte byte, int* sc, int* m) {
    if (j < 4) {
        *sc = byte(j) & 63;
        *m = byte(j + 4) & 63;
    } else {
        *sc = (byte(j + 4) & 0x0f) | ((byte(j - 4) >> 6) << 4);
        *m = (byte(j + 4) >> 4) | ((byte(j) >> 6) << 4);
    }
}

// The scale d · sc and the min dmin · m of sub-block `sub` of the Q4_K/Q5_K super-block b.
__device__ __forceinline__ void sub_block_scale_min_k4(const u8* b, int sub, float* scale,
                                                       float* min_value) {
    const float d = half_to_float(load_u16(b));
    const float dmin = half_to_float(load_u16(b + 2));
    int sc, m;
    const u8* q = b + 4;
    scale_min_k4(sub, [q](int k) { return (int)q[k]; }, &sc, &m);
    *scale = d * (float)sc;
    *min_value = dmin * (float)m;
}

// Q4_K and Q5_K: value l of sub-block `sub` of super-block b is d1 · code − m1, code its
// nibble of the 128 bytes at qs (low nibbles for even sub-blocks, high for odd) plus
// high_bit(l).
template <typename HighBit>
__device__ __forceinline__ void deq_k4(const u8* b, int sub, const u8* qs, float* v,
                                       HighBit high_bit) {
    const int pair = sub >> 1, high = sub & 1;
    float d1, m1;
    sub_block_scale_min_k4(b, sub, &d1, &m1);
    const u8* q = qs + 32 * pair;
    for (int l = 0; l < 32; l++) {
        const int code = (high ? (q[l] >> 4) : (q[l] & 0x0f)) + high_bit(l);
        v[l] = d1 * (float)code - m1;
    }
}

// Q4_K and Q5_K: the nibbles of sub-block `sub` (low nibbles for even sub-blocks, high for
// odd) from the 128 bytes at qs as codes 0..15, per 32 elements w = d * sc * c - dmin * m.
// Every read is a 128-bit load: blk must be 16-byte aligned.
__device__ __forceinline__ void nibble_codes_k4(const u8* blk, const u8* qs, int sub, int* c,
                                                float* a, float* b) {
    const int pair = sub >> 1, shift = 4 * (sub & 1);
    load_int4(qs + 32 * pair, c);
    load_int4(qs + 16 + 32 * pair, c + 4);
    for (int i = 0; i < 8; i++) c[i] = (c[i] >> shift) & 0x0f0f0f0f;
    // The super-block's first 16 bytes in one load: f16 d and dmin, then the 12 scale bytes.
    int head[4];
    load_int4(blk, head);
    const auto byte = [&](int k) {
        const u32 word = (u32)(k < 4 ? head[1] : k < 8 ? head[2] : head[3]);
        return (int)((word >> (8 * (k & 3))) & 0xff);
    };
    int sc, m;
    scale_min_k4(sub, byte, &sc, &m);
    const float d = half_to_float((u16)((u32)head[0] & 0xffff));
    const float dmin = half_to_float((u16)((u32)head[0] >> 16));
    one_scale_offset(d * (float)sc, -(dmin * (float)m), a, b);
}

// Q4_K: f16 d, f16 dmin, 12 bytes of scales, 128 bytes of nibbles.
struct fmt_q4_k : super_blocks<144> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        deq_k4(b, chunk & 7, b + 16, v, [](int) { return 0; });
    }
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        nibble_codes_k4(blk, blk + 16, chunk & 7, c, a, b);
    }
};

// Q5_K: f16 d, f16 dmin, 12 bytes of scales, 32 bytes of high bits, 128 bytes of nibbles.
struct fmt_q5_k : super_blocks<176> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const int sub = chunk & 7;
        const u8* qh = b + 16;
        const u8 bit = (u8)(1u << sub);
        deq_k4(b, sub, b + 48, v, [&](int l) { return (qh[l] & bit) ? 16 : 0; });
    }
    // Q5_K: Q4_K's nibbles plus a fifth bit (bit `sub` of each high-bit byte).
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
        const int sub = chunk & 7;
        nibble_codes_k4(blk, blk + 48, sub, c, a, b);
        int high[8];
        load_int4(blk + 16, high);
        load_int4(blk + 32, high + 4);
        for (int i = 0; i < 8; i++) c[i] |= ((high[i] >> sub) & 0x01010101) << 4;
    }
};

// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2 bits, 16 signed scales, f16 d.
struct fmt_q6_k : super_blocks<210> {
    __device__ static void deq32(const u8* row, int chunk, float* v) {
        const u8* b = block(row, chunk);
        const int sub = chunk & 7;
        const float d = half_to_float(load_u16(b + 208));
        const int half = sub >> 2, group = sub & 3;
        const u8* ql = b + 64 * half;
        const u8* qh = b + 128 + 32 * half;
        const i8* sc = (const i8*)(b + 192) + 8 * half;
        for (int l = 0; l < 32; l++) {
            const u8 low = (group & 1) ? ql[l + 32] : ql[l];
            const int nibble = (group >= 2) ? (low >> 4) : (low & 0x0f);
            const int code = (nibble | (((qh[l] >> (2 * group)) & 3) << 4)) - 32;
            v[l] = d * (float)sc[l / 16 + 2 * group] * (float)code;
        }
    }
    // Q6_K: codes 0..63 (a nibble of ql and two bits of qh), per 16 elements
    // w = d * sc * (c - 32).
    __device__ static void codes(const u8* row, int chunk, int* c, float* a, float* b) {
        const u8* blk = block(row, chunk);
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
