//! AVX2 Q4_K × Q8_K dot product (ggml's algorithm: integer sums per sub-block, one float
//! multiply-add per super-block, the min term from the activation block sums).

use std::arch::x86_64::*;

use super::BlockQ4K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::scale_min_k::ScaleMinK;
use crate::quant::x86::{
    hsum_float_8, i16_broadcast_control, load_i8x32, load_u8x32, prefetch_ahead,
    scales_and_min_term_k4,
};

/// AVX2 version of [`BlockQ4K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    scale_min_k_dot(w, a, |x, c| {
        let (qx, _) = x.qs.as_chunks::<32>();
        let bits = load_u8x32(&qx[c]);
        (
            _mm256_and_si256(bits, m4),
            _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4),
        )
    })
}

/// The frame of the Q4_K and Q5_K dot products (ggml's algorithm): per super-block the
/// sub-block scales and the min term ([`scales_and_min_term_k4`]), the integer sums of the
/// codes of sub-blocks `2c` and `2c + 1` (`codes(x, c)`, unsigned bytes) against the
/// activations times their scales, one float multiply-add per super-block, and the min terms
/// subtracted at the end.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scale_min_k_dot<W: ScaleMinK>(
    w: &[W],
    a: &[BlockQ8K],
    codes: impl Fn(&W, usize) -> (__m256i, __m256i),
) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (d, dmin, packed) = x.header();
        let (scales, d, min_term) = scales_and_min_term_k4(packed, d, dmin, y);
        acc_m += min_term;
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = _mm256_setzero_si256();
        for c in 0..4 {
            let (lo, hi) = codes(x, c);
            let sl = _mm256_shuffle_epi8(scales, i16_broadcast_control(2 * c));
            let sh = _mm256_shuffle_epi8(scales, i16_broadcast_control(2 * c + 1));
            let pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, load_i8x32(&qy[2 * c])));
            let ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, load_i8x32(&qy[2 * c + 1])));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc) - acc_m
}
