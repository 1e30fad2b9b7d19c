//! NEON IQ2_S × Q8_K dot products, as IQ2_XS's with the sign bytes stored whole: exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use super::BlockIq2S;
use crate::quant::aarch64::{Dot4, dot4_kernels, signed_grid_dot};
use crate::quant::iq_grids::{IQ2S_GRID, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq2S`]'s `vec_dot`: [`signed_grid_dot`] with its groups' ten-bit indices and whole sign
/// bytes.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq2S], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the caller guarantees what `D` needs.
    unsafe {
        signed_grid_dot::<D, _>(w, a, |x, ib| {
            let g = [0, 1, 2, 3].map(|l| IQ2S_GRID[x.index(4 * ib + l)]);
            let s = [0, 1, 2, 3].map(|l| SIGN_BYTES[x.signs(4 * ib + l) as usize]);
            (g, s)
        })
    }
}

dot4_kernels!(vec_dot(w: &[BlockIq2S], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
