//! NEON IQ2_XXS × Q8_K dot products: the four grid words of a sub-block in two registers, the
//! signs multiplied into the activations and one scale multiply per sub-block; the integer
//! sums are exact and the float steps are the reference's, so the result is bit-identical to
//! it (and to the AVX2 kernel).

use super::BlockIq2Xxs;
use crate::quant::aarch64::{Dot4, dot4_kernels, signed_grid_dot};
use crate::quant::iq_grids::{IQ2XXS_GRID, KSIGNS, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq2Xxs`]'s `vec_dot`: [`signed_grid_dot`] with its sub-block's index bytes and sign
/// groups.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq2Xxs], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the caller guarantees what `D` needs.
    unsafe {
        signed_grid_dot::<D, _>(w, a, |x, ib| {
            let (grid, signs) = x.sub_block(ib);
            let g = [0, 1, 2, 3].map(|l| IQ2XXS_GRID[(grid >> (8 * l)) as u8 as usize]);
            let s = [0, 1, 2, 3]
                .map(|l| SIGN_BYTES[KSIGNS[(signs >> (7 * l)) as usize & 127] as usize]);
            (g, s)
        })
    }
}

dot4_kernels!(vec_dot(w: &[BlockIq2Xxs], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
