//! NEON IQ2_XS × Q8_K dot products, as IQ2_XXS's with a scale per half sub-block: exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::BlockIq2Xs;
use crate::quant::aarch64::{Dot4, dot4_kernels, grid_dot, signed_grid_halves};
use crate::quant::iq_grids::{IQ2XS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;

/// [`BlockIq2Xs`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq2Xs], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq2Xs, ib: usize, q8: &[i8; 32]| {
        let q = &x.qs[4 * ib..4 * ib + 4];
        let g = [0, 1, 2, 3].map(|l| IQ2XS_GRID[(q[l] & 511) as usize]);
        let s = [0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(q[l] >> 9) as usize] as usize]);
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

dot4_kernels!(vec_dot(w: &[BlockIq2Xs], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
