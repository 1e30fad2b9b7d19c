//! NEON TQ2_0 × Q8_K dot products: the 2-bit codes (0..=3) dotted with the activations as
//! bytes and the activations' sum subtracted once, which is `Σ (q − 1) · a` exactly; the float
//! step is the reference's, so the result is bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::BlockTq2_0;
use crate::quant::aarch64::{Dot4, dot4_kernels, dot32, hsum_i32, load_i8x32, load_u8x32};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockTq2_0`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockTq2_0], a: &[BlockQ8K]) -> f32 {
    let m3 = vdupq_n_u8(3);
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (qs, _) = x.qs.as_chunks::<32>();
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = vdupq_n_s32(0);
        for (half, bits) in qs.iter().enumerate() {
            let bits = load_u8x32(bits);
            let codes = [
                bits.map(|b| vandq_u8(b, m3)),
                bits.map(|b| vandq_u8(vshrq_n_u8::<2>(b), m3)),
                bits.map(|b| vandq_u8(vshrq_n_u8::<4>(b), m3)),
                bits.map(|b| vshrq_n_u8::<6>(b)),
            ];
            for (l, codes) in codes.into_iter().enumerate() {
                let codes = codes.map(|c| vreinterpretq_s8_u8(c));
                // SAFETY: the caller guarantees what `D` needs.
                let p = unsafe { dot32::<D>(codes, load_i8x32(&q8[4 * half + l])) };
                acc = vaddq_s32(acc, p);
            }
        }
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let sum = hsum_i32(acc) - a_sum;
        sumf += sum as f32 * (x.d.to_f32() * y.d);
    }
    sumf
}

dot4_kernels!(vec_dot(w: &[BlockTq2_0], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
