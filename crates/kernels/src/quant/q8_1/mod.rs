//! Q8_1: Q8_0 plus the block's scaled code sum `s = d * sum(q)`; the activation format of the
//! affine 32-element formats (Q4_1, Q5_1), whose min term needs that sum.

use half::f16;
use rinfer_formats::GgmlType;

use super::q8_0::quantize_codes;
use super::util::{dot_codes, scale_codes};
use super::{BlockFormat, Quantize};

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q8_1 block.
    BlockQ8_1, 36 bytes {
        /// Scale.
        d: f16,
        /// `d * sum(qs)`.
        s: f16,
        /// Codes.
        qs: [i8; 32],
    }
}

impl BlockQ8_1 {
    /// The dot product of an affine weight block, its 32 codes `codes` at scale `d` with the
    /// min `m` added, with this block: `(d · d_a) · Σ q·a + m · s_a`, as ggml.
    #[inline]
    pub(crate) fn affine_dot(&self, d: f32, m: f32, codes: [i32; 32]) -> f32 {
        let sumi = dot_codes(codes, &self.qs);
        (d * self.d.to_f32()) * sumi as f32 + m * self.s.to_f32()
    }
}

impl BlockFormat for BlockQ8_1 {
    const TYPE: GgmlType = GgmlType::Q8_1;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        scale_codes(self.d.to_f32(), self.qs.map(i32::from), out);
    }
}

impl Quantize for BlockQ8_1 {
    fn quantize(x: &[f32]) -> Self {
        let (d, qs) = quantize_codes(x);
        let sum: i32 = qs.iter().map(|&q| q as i32).sum();
        BlockQ8_1 {
            d: f16::from_f32(d),
            s: f16::from_f32(sum as f32 * d),
            qs,
        }
    }
}
