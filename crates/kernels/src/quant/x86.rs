//! AVX2 building blocks shared by the per-type x86 kernels (the same helpers ggml uses).
//!
//! Every function requires AVX2, FMA and F16C; they are only reached from kernels that the
//! dispatch table selects after detecting those features.

use std::arch::x86_64::*;

use half::f16;

/// Converts an f16 to f32 with F16C. (`half`'s conversion checks the CPU on every call, which
/// costs more than the rest of a 32-value block's dot product.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_to_f32(h: f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32)))
}

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

/// Dot products of groups of 4 unsigned bytes `ax` with signed bytes `sy`, as 8 float lanes.
/// Exact while each pair's sum of products fits an i16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_us8_pairs_float(ax: __m256i, sy: __m256i) -> __m256 {
    sum_i16_pairs_float(_mm256_maddubs_epi16(ax, sy))
}

/// Pairwise products of signed bytes summed into i16 lanes: `x[2i]*y[2i] + x[2i+1]*y[2i+1]`.
/// Exact while `y` avoids -128.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_add_i8_pairs(x: __m256i, y: __m256i) -> __m256i {
    _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// Dot products of groups of 4 signed bytes, as 8 float lanes. Exact while `y` avoids -128.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    sum_i16_pairs_float(mul_add_i8_pairs(x, y))
}

/// Looks up 32 table values: byte `j` of the result is `table[j' & 0xF]` where `j'` is the low
/// nibble of `q[j]` for `j < 16` and the high nibble of `q[j - 16]` after (the Q4_0 packing).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn lookup_nibbles_32(table: __m128i, q: &[u8; 16]) -> __m256i {
    let bits = load_u8x16(q);
    let m4 = _mm_set1_epi8(0xF);
    let lo = _mm_shuffle_epi8(table, _mm_and_si128(bits, m4));
    let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(bits), m4));
    _mm256_set_m128i(hi, lo)
}

/// Two i16 scales as 16 lanes: `lo` in the low eight, `hi` in the high eight (for the groups of
/// 16 values that the two halves of a 32-byte register hold).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scale_pair(lo: i16, hi: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
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
