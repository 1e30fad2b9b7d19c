//! AVX2 IQ2_XXS × Q8_K dot product: the four grid words of a sub-block in one register, the
//! signs applied to the activations (`vpsignb`), unsigned-by-signed byte products (`vpmaddubsw`)
//! and one i16 scale multiply per sub-block; the integer sums are exact, and the float steps
//! are the reference's, so the result is bit-identical to it.

use std::arch::x86_64::*;

use super::BlockIq2Xxs;
use crate::quant::iq_grids::{IQ2XXS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{hsum_i32_8, load_i8x32, prefetch_ahead, u64x4};

/// AVX2 version of [`BlockIq2Xxs`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq2Xxs], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = _mm256_setzero_si256();
        for (ib, q8) in q8.iter().enumerate() {
            let (grid, signs) = x.sub_block(ib);
            let g = u64x4([0, 1, 2, 3].map(|l| IQ2XXS_GRID[(grid >> (8 * l)) as u8 as usize]));
            let s = u64x4(
                [0, 1, 2, 3]
                    .map(|l| SIGN_BYTES[KSIGNS[(signs >> (7 * l)) as usize & 127] as usize]),
            );
            let p = _mm256_maddubs_epi16(g, _mm256_sign_epi8(load_i8x32(q8), s));
            let ls = _mm256_set1_epi16(2 * (signs >> 28) as i16 + 1);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ls));
        }
        sumf += x.d.to_f32() * y.d * hsum_i32_8(acc) as f32;
    }
    0.125 * sumf
}
