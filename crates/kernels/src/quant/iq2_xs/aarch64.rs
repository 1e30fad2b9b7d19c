//! NEON IQ2_XS × Q8_K dot products, as IQ2_XXS's with a scale per half sub-block: exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use super::BlockIq2Xs;
use crate::quant::aarch64::{Dot4, dot4_kernels, signed_grid_dot};
use crate::quant::iq_grids::{IQ2XS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq2Xs`]'s `vec_dot`: [`signed_grid_dot`] with its groups' words of index and sign group.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq2Xs], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the caller guarantees what `D` needs.
    unsafe {
        signed_grid_dot::<D, _>(w, a, |x, ib| {
            let q = &x.qs[4 * ib..4 * ib + 4];
            let g = [0, 1, 2, 3].map(|l| IQ2XS_GRID[(q[l] & 511) as usize]);
            let s = [0, 1, 2, 3].map(|l| SIGN_BYTES[KSIGNS[(q[l] >> 9) as usize] as usize]);
            (g, s)
        })
    }
}

dot4_kernels!(vec_dot(w: &[BlockIq2Xs], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
