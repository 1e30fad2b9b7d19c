//! The bitwise steps that complete the packed AVX-512 kernels' codes from bits stored apart:
//! `low | (high & mask)` in one instruction, and the fifth bits of Q5_0 and Q5_K.

use std::arch::x86_64::*;

/// `low | (high & mask)`, bitwise, in one `vpternlogd` (the truth table of `A | (B & C)` with
/// `A = 0xF0`, `B = 0xCC`, `C = 0xAA`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn or_masked(low: __m512i, high: __m512i, mask: __m512i) -> __m512i {
    _mm512_ternarylogic_epi32::<0xF8>(low, high, mask)
}

/// Each of `codes` with bits `mask` of the matching vector of `high` added:
/// `codes[k] | (high[k] & mask)`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn or_masked_each<const K: usize>(
    mut codes: [__m512i; K],
    high: [__m512i; K],
    mask: __m512i,
) -> [__m512i; K] {
    for (c, h) in codes.iter_mut().zip(high) {
        *c = or_masked(*c, h, mask);
    }
    codes
}

/// Eight vectors of codes below 16 (vector `g` giving each row its codes `4g..4g + 4`) with
/// their fifth bits added from `h`, whose bit `g` of each byte is the fifth bit of that byte's
/// code in vector `g` (the layout of Q5_0 and Q5_K).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn with_fifth_bits(codes: [__m512i; 8], h: __m512i) -> [__m512i; 8] {
    // Bit g of each byte moved to bit 4 (16-bit shifts: the neighbouring byte's bits only land
    // outside bit 4).
    let fifth = [
        _mm512_slli_epi16::<4>(h),
        _mm512_slli_epi16::<3>(h),
        _mm512_slli_epi16::<2>(h),
        _mm512_slli_epi16::<1>(h),
        h,
        _mm512_srli_epi16::<1>(h),
        _mm512_srli_epi16::<2>(h),
        _mm512_srli_epi16::<3>(h),
    ];
    or_masked_each(codes, fifth, _mm512_set1_epi8(0x10))
}
