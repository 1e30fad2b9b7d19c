//! AVX2 Q5_K × Q8_K dot product (ggml's algorithm: the fifth bits shifted into place per
//! sub-block, integer sums per sub-block, the min term from the activation block sums).

use std::arch::x86_64::*;

use super::BlockQ5K;
use crate::quant::q4_k::x86::scale_min_k_dot;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::load_u8x32;

/// AVX2 version of [`BlockQ5K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let m16 = _mm256_set1_epi8(0x10);
    scale_min_k_dot(w, a, |x, c| {
        let hbits = load_u8x32(&x.qh);
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
        let (qx, _) = x.qs.as_chunks::<32>();
        let bits = load_u8x32(&qx[c]);
        (
            _mm256_or_si256(_mm256_and_si256(bits, m4), high(2 * c)),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4),
                high(2 * c + 1),
            ),
        )
    })
}
