//! AVX2 IQ3_XXS × Q8_K dot product: the eight grid words of a sub-block in one register, the
//! signs applied to the activations, byte products and one i16 scale multiply per sub-block;
//! exact integer sums and the reference's float steps, so bit-identical to it.

use std::arch::x86_64::*;

use super::BlockIq3Xxs;
use crate::quant::iq_grids::{IQ3XXS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{grid_dot, signed_grid_product, u32x8, u64x4};

/// AVX2 version of [`BlockIq3Xxs`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq3Xxs], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq3Xxs, ib: usize, q8| {
        let word = x.signs_and_scale(ib);
        let idx = &x.qs[8 * ib..8 * ib + 8];
        let g = u32x8([0, 1, 2, 3, 4, 5, 6, 7].map(|k| IQ3XXS_GRID[idx[k] as usize]));
        let s = u64x4(
            [0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(word >> (7 * l)) as usize & 127] as usize]),
        );
        signed_grid_product(g, q8, s, _mm256_set1_epi16(2 * (word >> 28) as i16 + 1))
    };
    0.25 * grid_dot(w, a, sub_block, |x, y, sumi| {
        x.d.to_f32() * y.d * sumi as f32
    })
}
