//! NEON Q5_1 × Q8_1 dot product, with Q4_1's arithmetic (`q4_1::aarch64`) on 5-bit codes.

use std::arch::aarch64::*;

use super::BlockQ5_1;
use crate::quant::aarch64::{
    Dot4, dot4_kernels, dot32, fifth_bits_32, hsum_i32, load_i8x32, nibbles_32,
};
use crate::quant::q8_1::BlockQ8_1;

/// [`BlockQ5_1`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let (mut acc, mut mins) = (0.0f32, 0.0f32);
    for (x, y) in w.iter().zip(a) {
        let (low, high) = (nibbles_32(&x.qs), fifth_bits_32(x.qh));
        let q = [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(low[i], high[i])));
        // SAFETY: the caller guarantees what `D` needs.
        let sum = hsum_i32(unsafe { dot32::<D>(q, load_i8x32(&y.qs)) });
        acc = (x.d.to_f32() * y.d.to_f32()).mul_add(sum as f32, acc);
        mins += x.m.to_f32() * y.s.to_f32();
    }
    acc + mins
}

dot4_kernels!(vec_dot(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32; vec_dot_neon, vec_dot_dotprod);
