//! NEON IQ3_S × Q8_K dot products: the eight grid words of a sub-block in two registers, the
//! signs multiplied into the activations and one scale multiply per sub-block; exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use super::BlockIq3S;
use crate::quant::aarch64::{Dot4, dot4_kernels, signed_grid_dot};
use crate::quant::iq_grids::{IQ3S_GRID, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq3S`]'s `vec_dot`: [`signed_grid_dot`] with its nine-bit indices (two grid entries a
/// group) and sign bytes.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq3S], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the caller guarantees what `D` needs.
    unsafe {
        signed_grid_dot::<D, _>(w, a, |x, ib| {
            let entry = |k: usize| IQ3S_GRID[x.index(ib, k)] as u64;
            let g = [0, 1, 2, 3].map(|l| entry(2 * l) | entry(2 * l + 1) << 32);
            let s = [0, 1, 2, 3].map(|l| SIGN_BYTES[x.signs[4 * ib + l] as usize]);
            (g, s)
        })
    }
}

dot4_kernels!(vec_dot(w: &[BlockIq3S], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
