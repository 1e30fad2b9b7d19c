//! NEON IQ1_M × Q8_K dot products, as IQ1_S's with two scales per sub-block and the shifts'
//! signs (a byte of 1 or −1 per value of a group) dotted with the activations; exact integer
//! sums and the reference's float steps, so bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::BlockIq1M;
use crate::quant::aarch64::{Dot4, dot4_kernels, hsum_i32, i8x16_from_u64x2, load_i8x32};
use crate::quant::iq1_s::DELTA;
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq1M`]'s `vec_dot`: per super-block the exact grid sum `Σ_h s_h · Σ grid·a` and
/// shift sum `Σ_h s_h · Σ_g ±Σ a` over the half sub-blocks `h` (groups `g`), then the
/// reference's `sumf += d_w · d_a · (grid + δ · shift)`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq1M], a: &[BlockQ8K]) -> f32 {
    let sign_bytes = |x: &BlockIq1M, g: usize| match x.delta_sign(g) {
        1 => 0x0101_0101_0101_0101,
        _ => u64::MAX,
    };
    let zero = vdupq_n_s32(0);
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (q8, _) = y.qs.as_chunks::<32>();
        let (mut grid_acc, mut shift_acc) = (zero, zero);
        for (ib, q8) in q8.iter().enumerate() {
            let q8 = load_i8x32(q8);
            for (h, &q8) in q8.iter().enumerate() {
                let (g0, g1) = (4 * ib + 2 * h, 4 * ib + 2 * h + 1);
                let grid = i8x16_from_u64x2([x.entry(g0), x.entry(g1)]);
                let signs = i8x16_from_u64x2([sign_bytes(x, g0), sign_bytes(x, g1)]);
                // SAFETY: the caller guarantees what `D` needs.
                let (grid, shift) = unsafe { (D::dot4(zero, grid, q8), D::dot4(zero, signs, q8)) };
                let scale = x.scale(2 * ib + h);
                grid_acc = vmlaq_n_s32(grid_acc, grid, scale);
                shift_acc = vmlaq_n_s32(shift_acc, shift, scale);
            }
        }
        let (grid_sum, shift_sum) = (hsum_i32(grid_acc), hsum_i32(shift_acc));
        sumf += x.d().to_f32() * y.d * (grid_sum as f32 + DELTA * shift_sum as f32);
    }
    sumf
}

dot4_kernels!(vec_dot(w: &[BlockIq1M], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
