//! AVX2 building blocks shared by the per-type x86 kernels (the same helpers ggml uses).
//!
//! Every function requires AVX2, FMA and F16C; they are only reached from kernels that the
//! dispatch table selects after detecting those features.

use std::arch::x86_64::*;

/// Loads 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_u8x32(b: &[u8; 32]) -> __m256i {
    // SAFETY: reads exactly the 32 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

/// Loads 32 signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_i8x32(b: &[i8; 32]) -> __m256i {
    // SAFETY: reads exactly the 32 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

/// Loads 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load_u8x16(b: &[u8; 16]) -> __m128i {
    // SAFETY: reads exactly the 16 bytes `b` borrows; unaligned loads are allowed.
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}

/// Horizontal sum of 8 floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_float_8(x: __m256) -> f32 {
    let mut res = _mm256_extractf128_ps::<1>(x);
    res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

/// Adds adjacent pairs of i16 lanes into 8 i32 lanes, converted to float.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn sum_i16_pairs_float(x: __m256i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), x))
}

/// Dot products of groups of 4 signed bytes, as 8 float lanes. Exact while `y` avoids -128.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    sum_i16_pairs_float(_mm256_maddubs_epi16(ax, sy))
}

/// Unpacks 32 nibbles: element `j` from the low nibble of `q[j]`, element `j + 16` from the high.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn bytes_from_nibbles_32(q: &[u8; 16]) -> __m256i {
    let tmp = load_u8x16(q);
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    _mm256_and_si256(_mm256_set1_epi8(0xF), bytes)
}

/// Spreads the 32 bits of `x` to 32 bytes: byte `i` is `0xFF` when bit `i` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn bytes_from_bits_32(x: u32) -> __m256i {
    let shuffle = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x as i32), shuffle);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}
