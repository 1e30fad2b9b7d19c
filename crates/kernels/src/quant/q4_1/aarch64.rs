//! NEON Q4_1 × Q8_1 dot product: per block the exact integer `Σ q·a` times `d_w·d_a`, added
//! with one fused multiply-add, blocks in order; the min terms `m_w·s_a` (Q8_1's f16 sum, as in
//! ggml and the AVX2 kernel) summed apart and added at the end.

use std::arch::aarch64::vreinterpretq_s8_u8;

use super::BlockQ4_1;
use crate::quant::aarch64::{Dot4, dot4_kernels, dot32, hsum_i32, load_i8x32, nibbles_32};
use crate::quant::q8_1::BlockQ8_1;

/// [`BlockQ4_1`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    let (mut acc, mut mins) = (0.0f32, 0.0f32);
    for (x, y) in w.iter().zip(a) {
        let q = nibbles_32(&x.qs).map(|n| vreinterpretq_s8_u8(n));
        // SAFETY: the caller guarantees what `D` needs.
        let sum = hsum_i32(unsafe { dot32::<D>(q, load_i8x32(&y.qs)) });
        acc = (x.d.to_f32() * y.d.to_f32()).mul_add(sum as f32, acc);
        mins += x.m.to_f32() * y.s.to_f32();
    }
    acc + mins
}

dot4_kernels!(vec_dot(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32; vec_dot_neon, vec_dot_dotprod);
