//! NEON IQ2_S × Q8_K dot products, as IQ2_XS's with the sign bytes stored whole: exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::BlockIq2S;
use crate::quant::aarch64::{Dot4, dot4_kernels, grid_dot, signed_grid_halves};
use crate::quant::iq_grids::{IQ2S_GRID, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;

/// [`BlockIq2S`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq2S], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq2S, ib: usize, q8: &[i8; 32]| {
        let g = [0, 1, 2, 3].map(|l| IQ2S_GRID[x.index(4 * ib + l)]);
        let s = [0, 1, 2, 3].map(|l| SIGN_BYTES[x.signs(4 * ib + l) as usize]);
        // SAFETY: the caller guarantees what `D` needs.
        let [p0, p1] = unsafe { signed_grid_halves::<D>(g, s, q8) };
        let ls = |h: usize| x.multiplier(h);
        vmlaq_n_s32(vmulq_n_s32(p0, ls(2 * ib)), p1, ls(2 * ib + 1))
    };
    0.125
        * grid_dot(w, a, sub_block, |x, y, sumi| {
            x.d.to_f32() * y.d * sumi as f32
        })
}

dot4_kernels!(vec_dot(w: &[BlockIq2S], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
