//! AVX2 IQ2_XS × Q8_K dot product, as IQ2_XXS's: four grid words per sub-block in one register,
//! the signs applied to the activations, byte products and the two half-sub-block scales in
//! one i16 multiply; exact integer sums and the reference's float steps, so bit-identical.

use super::BlockIq2Xs;
use crate::quant::iq_grids::{IQ2XS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;
use crate::quant::x86::{grid_dot, scale_pair, signed_grid_product, u64x4};

/// AVX2 version of [`BlockIq2Xs`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq2Xs], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq2Xs, ib: usize, q8| {
        let q = &x.qs[4 * ib..4 * ib + 4];
        let g = u64x4([0, 1, 2, 3].map(|l| IQ2XS_GRID[(q[l] & 511) as usize]));
        let s = u64x4([0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(q[l] >> 9) as usize] as usize]));
        let ls = |h: usize| x.multiplier(h) as i16;
        signed_grid_product(g, q8, s, scale_pair(ls(2 * ib), ls(2 * ib + 1)))
    };
    0.125
        * grid_dot(w, a, sub_block, |x, y, sumi| {
            x.d.to_f32() * y.d * sumi as f32
        })
}
