//! NEON IQ3_XXS × Q8_K dot products: the eight grid words of a sub-block in two registers, the
//! signs multiplied into the activations and one scale multiply per sub-block; exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use super::BlockIq3Xxs;
use crate::quant::aarch64::{Dot4, dot4_kernels, signed_grid_dot};
use crate::quant::iq_grids::{IQ3XXS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq3Xxs`]'s `vec_dot`: [`signed_grid_dot`] with its index bytes (two grid entries a group)
/// and sign groups.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq3Xxs], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the caller guarantees what `D` needs.
    unsafe {
        signed_grid_dot::<D, _>(w, a, |x, ib| {
            let word = x.signs_and_scale(ib);
            let idx = &x.qs[8 * ib..8 * ib + 8];
            let entry = |k: usize| IQ3XXS_GRID[idx[k] as usize] as u64;
            let g = [0, 1, 2, 3].map(|l| entry(2 * l) | entry(2 * l + 1) << 32);
            let s =
                [0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(word >> (7 * l)) as usize & 127] as usize]);
            (g, s)
        })
    }
}

dot4_kernels!(vec_dot(w: &[BlockIq3Xxs], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
