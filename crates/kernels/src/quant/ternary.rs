//! What the ternary formats TQ1_0 and TQ2_0 share: a 256-value super-block is an f16 scale
//! times values in {−1, 0, 1}; they differ only in how the values are packed, which
//! [`Ternary`] reads. The reference dot product against Q8_K is one exact integer sum and one
//! float multiply per super-block.

use half::f16;
use rinfer_formats::QK_K;

use super::q8_k::BlockQ8K;
use super::sum_blocks;

/// A super-block of 256 ternary values and one scale.
pub(crate) trait Ternary {
    /// Super-block scale.
    fn d(&self) -> f16;
    /// The 256 values (−1, 0 or 1), in order.
    fn values(&self) -> [i8; QK_K];
}

/// The reference dequantizer of a [`Ternary`] block.
pub(crate) fn dequantize<B: Ternary>(b: &B, out: &mut [f32]) {
    let d = b.d().to_f32();
    for (o, &v) in out.iter_mut().zip(&b.values()) {
        *o = v as f32 * d;
    }
}

/// The reference dot product of [`Ternary`] blocks with Q8_K activations.
pub(crate) fn vec_dot<B: Ternary>(w: &[B], a: &[BlockQ8K]) -> f32 {
    sum_blocks(w, a, |x, y| {
        let sum: i32 = x
            .values()
            .iter()
            .zip(&y.qs)
            .map(|(&v, &q)| v as i32 * q as i32)
            .sum();
        sum as f32 * (x.d().to_f32() * y.d)
    })
}
