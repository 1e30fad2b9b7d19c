//! NEON IQ3_XXS × Q8_K dot products: the eight grid words of a sub-block in two registers, the
//! signs multiplied into the activations and one scale multiply per sub-block; exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::BlockIq3Xxs;
use crate::quant::aarch64::{Dot4, dot4_kernels, grid_dot, signed_grid_halves};
use crate::quant::iq_grids::{IQ3XXS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq3Xxs`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq3Xxs], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq3Xxs, ib: usize, q8: &[i8; 32]| {
        let word = x.signs_and_scale(ib);
        let idx = &x.qs[8 * ib..8 * ib + 8];
        let entry = |k: usize| IQ3XXS_GRID[idx[k] as usize] as u64;
        let g = [0, 1, 2, 3].map(|l| entry(2 * l) | entry(2 * l + 1) << 32);
        let s = [0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(word >> (7 * l)) as usize & 127] as usize]);
        // SAFETY: the caller guarantees what `D` needs.
        let [p0, p1] = unsafe { signed_grid_halves::<D>(g, s, q8) };
        vmulq_n_s32(vaddq_s32(p0, p1), 2 * (word >> 28) as i32 + 1)
    };
    0.25 * grid_dot(w, a, sub_block, |x, y, sumi| {
        x.d.to_f32() * y.d * sumi as f32
    })
}

dot4_kernels!(vec_dot(w: &[BlockIq3Xxs], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
