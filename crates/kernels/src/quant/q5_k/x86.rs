//! AVX2 Q5_K × Q8_K dot product (ggml's algorithm: the fifth bits shifted into place per
//! sub-block, integer sums per sub-block, the min term from the activation block sums).

use std::arch::x86_64::*;

use super::BlockQ5K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{
    hsum_float_8, i16_broadcast_control, load_i8x32, load_u8x32, prefetch_ahead,
    scales_and_min_term_k4,
};

/// AVX2 version of [`BlockQ5K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let m16 = _mm256_set1_epi8(0x10);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (scales, d, min_term) = scales_and_min_term_k4(&x.scales, x.d, x.dmin, y);
        acc_m += min_term;

        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let hbits = load_u8x32(&x.qh);
        let mut sumi = _mm256_setzero_si256();
        for c in 0..4 {
            let bits = load_u8x32(&qx[c]);
            // Fifth bit of sub-block `j` is bit `j` of each `qh` byte; move it to bit 4.
            let high = |j: usize| {
                let h = match j {
                    0 => _mm256_slli_epi16::<4>(hbits),
                    1 => _mm256_slli_epi16::<3>(hbits),
                    2 => _mm256_slli_epi16::<2>(hbits),
                    3 => _mm256_slli_epi16::<1>(hbits),
                    4 => hbits,
                    5 => _mm256_srli_epi16::<1>(hbits),
                    6 => _mm256_srli_epi16::<2>(hbits),
                    _ => _mm256_srli_epi16::<3>(hbits),
                };
                _mm256_and_si256(h, m16)
            };
            let lo = _mm256_or_si256(_mm256_and_si256(bits, m4), high(2 * c));
            let hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4),
                high(2 * c + 1),
            );
            let pl = _mm256_maddubs_epi16(lo, load_i8x32(&qy[2 * c]));
            let ph = _mm256_maddubs_epi16(hi, load_i8x32(&qy[2 * c + 1]));
            let pl = _mm256_madd_epi16(
                _mm256_shuffle_epi8(scales, i16_broadcast_control(2 * c)),
                pl,
            );
            let ph = _mm256_madd_epi16(
                _mm256_shuffle_epi8(scales, i16_broadcast_control(2 * c + 1)),
                ph,
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc) - acc_m
}
