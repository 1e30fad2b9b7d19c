// Fixed-width types and float conversions shared by every kernel. No CUDA headers are
// included: NVRTC compiles this without a toolkit's include folder.

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// Little-endian loads from byte pointers of any alignment (GGUF blocks are 2-byte aligned).
__device__ __forceinline__ u16 load_u16(const u8* p) {
    return (u16)(p[0] | (p[1] << 8));
}

__device__ __forceinline__ u32 load_u32(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

// IEEE half to float, exact for every input (subnormals, infinities, NaN).
__device__ __forceinline__ float half_to_float(u16 h) {
    const u32 sign = (u32)(h & 0x8000u) << 16;
    const u32 exponent = (h >> 10) & 0x1fu;
    const u32 mantissa = h & 0x3ffu;
    if (exponent == 0) {
        // Zero or subnormal: mantissa * 2^-24, exact in f32.
        const float magnitude = (float)mantissa * 5.9604644775390625e-8f;
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) {
        return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
    }
    return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

__device__ __forceinline__ float bf16_to_float(u16 b) {
    return __uint_as_float((u32)b << 16);
}

// Float to IEEE half, rounded to nearest even (the `half` crate's `f16::from_f32`, which the
// CPU's f16 KV cache stores): overflow to infinity, subnormal halves below 2^-14, NaN kept
// quiet with the top bits of its payload.
__device__ __forceinline__ u16 float_to_half(float f) {
    const u32 x = __float_as_uint(f);
    const u32 sign = (x >> 16) & 0x8000u;
    const u32 magnitude = x & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) {
        const u32 nan = magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u;
        return (u16)(sign | 0x7c00u | nan);
    }
    if (magnitude >= 0x477ff000u) return (u16)(sign | 0x7c00u);  // 65520 and up round to inf
    if (magnitude < 0x38800000u) {
        // Below 2^-14: a subnormal half, mantissa * 2^-24; 2^-25 and less round to zero.
        if (magnitude <= 0x33000000u) return (u16)sign;
        const u32 shift = 126u - (magnitude >> 23);  // 14 to 24
        const u32 mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        u32 h = mantissa >> shift;
        const u32 rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (h & 1u))) h++;
        return (u16)(sign | h);
    }
    u32 h = (magnitude >> 13) - (112u << 10);  // exponent rebiased from 127 to 15
    const u32 rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (u16)(sign | h);
}
