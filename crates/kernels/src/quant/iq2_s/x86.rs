//! AVX2 IQ2_S × Q8_K dot product, as IQ2_XS's with the sign bytes stored whole: exact integer
//! sums and the reference's float steps, so bit-identical to it.

use super::BlockIq2S;
use crate::quant::iq_grids::{IQ2S_GRID, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;
use crate::quant::x86::{grid_dot, scale_pair, signed_grid_product, u64x4};

/// AVX2 version of [`BlockIq2S`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq2S], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq2S, ib: usize, q8| {
        let g = u64x4([0, 1, 2, 3].map(|l| IQ2S_GRID[x.index(4 * ib + l)]));
        let s = u64x4([0, 1, 2, 3].map(|l| SIGN_BYTES[x.signs(4 * ib + l) as usize]));
        let ls = |h: usize| x.multiplier(h) as i16;
        signed_grid_product(g, q8, s, scale_pair(ls(2 * ib), ls(2 * ib + 1)))
    };
    0.125
        * grid_dot(w, a, sub_block, |x, y, sumi| {
            x.d.to_f32() * y.d * sumi as f32
        })
}
