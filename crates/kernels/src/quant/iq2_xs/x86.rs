//! AVX2 IQ2_XS × Q8_K dot product, as IQ2_XXS's: four grid words per sub-block in one register,
//! the signs applied to the activations, byte products and the two half-sub-block scales in
//! one i16 multiply; exact integer sums and the reference's float steps, so bit-identical.

use std::arch::x86_64::*;

use super::BlockIq2Xs;
use crate::quant::iq_grids::{IQ2XS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{hsum_i32_8, load_i8x32, prefetch_ahead, scale_pair, u64x4};

/// AVX2 version of [`BlockIq2Xs`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq2Xs], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = _mm256_setzero_si256();
        for (ib, q8) in q8.iter().enumerate() {
            let q = &x.qs[4 * ib..4 * ib + 4];
            let g = u64x4([0, 1, 2, 3].map(|l| IQ2XS_GRID[(q[l] & 511) as usize]));
            let s = u64x4([0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(q[l] >> 9) as usize] as usize]));
            let p = _mm256_maddubs_epi16(g, _mm256_sign_epi8(load_i8x32(q8), s));
            let ls = |h: usize| 2 * x.scale(h) as i16 + 1;
            acc = _mm256_add_epi32(
                acc,
                _mm256_madd_epi16(p, scale_pair(ls(2 * ib), ls(2 * ib + 1))),
            );
        }
        sumf += x.d.to_f32() * y.d * hsum_i32_8(acc) as f32;
    }
    0.125 * sumf
}
