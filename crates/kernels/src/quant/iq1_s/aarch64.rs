//! NEON IQ1_S × Q8_K dot products: the four grid words of a sub-block (bytes −1, 0 or 1) in two
//! registers, dotted with the activations and scaled by one multiply per sub-block; the shift
//! part comes from the activations' sums. Exact integer sums and the reference's float steps,
//! so bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::{BlockIq1S, DELTA};
use crate::quant::aarch64::{Dot4, dot4_kernels, dot32, grid_dot, i8x16_from_u64x2, load_i8x32};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq1S`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq1S], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq1S, ib: usize, q8: &[i8; 32]| {
        let g = [0, 1].map(|h| i8x16_from_u64x2([x.entry(ib, 2 * h), x.entry(ib, 2 * h + 1)]));
        // SAFETY: the caller guarantees what `D` needs.
        let p = unsafe { dot32::<D>(g, load_i8x32(q8)) };
        vmulq_n_s32(p, x.scale(ib))
    };
    let super_block = |x: &BlockIq1S, y: &BlockQ8K, sumi: i32| {
        x.d.to_f32() * y.d * (sumi as f32 + DELTA * x.shift_sum(y) as f32)
    };
    grid_dot(w, a, sub_block, super_block)
}

dot4_kernels!(vec_dot(w: &[BlockIq1S], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
