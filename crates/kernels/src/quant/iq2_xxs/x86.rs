//! AVX2 IQ2_XXS × Q8_K dot product: the four grid words of a sub-block in one register, the
//! signs applied to the activations (`vpsignb`), unsigned-by-signed byte products (`vpmaddubsw`)
//! and one i16 scale multiply per sub-block; the integer sums are exact, and the float steps
//! are the reference's, so the result is bit-identical to it.

use std::arch::x86_64::*;

use super::BlockIq2Xxs;
use crate::quant::iq_grids::{IQ2XXS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{grid_dot, signed_grid_product, u64x4};

/// AVX2 version of [`BlockIq2Xxs`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq2Xxs], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq2Xxs, ib: usize, q8| {
        let (grid, signs) = x.sub_block(ib);
        let g = u64x4([0, 1, 2, 3].map(|l| IQ2XXS_GRID[(grid >> (8 * l)) as u8 as usize]));
        let s = u64x4(
            [0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(signs >> (7 * l)) as usize & 127] as usize]),
        );
        signed_grid_product(g, q8, s, _mm256_set1_epi16(2 * (signs >> 28) as i16 + 1))
    };
    0.125
        * grid_dot(w, a, sub_block, |x, y, sumi| {
            x.d.to_f32() * y.d * sumi as f32
        })
}
