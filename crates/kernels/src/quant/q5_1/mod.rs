//! Q5_1: 32 values per block, 5-bit codes (packed as Q5_0), f16 scale and min: `x = d * q + m`.
//!
//! Dots run against Q8_1 activations, as in ggml.

use half::f16;
use rinfer_formats::GgmlType;

use super::q5_0::{five_bit_codes, pack_five_bits};
use super::q8_1::BlockQ8_1;
use super::util::{affine_code, min_max, scale_codes_min};
use super::{BlockFormat, Quantize, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q5_1 block.
    BlockQ5_1, 24 bytes {
        /// Scale.
        d: f16,
        /// Min (added).
        m: f16,
        /// Fifth bit of element `j` in bit `j` (little-endian u32).
        qh: [u8; 4],
        /// Low 4 bits, packed as Q4_0.
        qs: [u8; 16],
    }
}

impl BlockFormat for BlockQ5_1 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        let codes = five_bit_codes(&self.qs, self.qh);
        scale_codes_min(self.d.to_f32(), self.m.to_f32(), codes, out);
    }
}

impl Quantize for BlockQ5_1 {
    fn quantize(x: &[f32]) -> Self {
        // ggml starts Q5_1's bounds at the first value (Q4_1's at ±f32::MAX).
        let (min, max) = min_max(&x[1..], (x[0], x[0]));
        let (d, code) = affine_code(min, max, 31);
        let (qs, qh) = pack_five_bits(x, |v| code(v) as u32);
        BlockQ5_1 {
            d: f16::from_f32(d),
            m: f16::from_f32(min),
            qh,
            qs,
        }
    }
}

impl VecDot for BlockQ5_1 {
    type Activation = BlockQ8_1;

    fn vec_dot(w: &[Self], a: &[BlockQ8_1]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let codes = five_bit_codes(&x.qs, x.qh);
            y.affine_dot(x.d.to_f32(), x.m.to_f32(), codes)
        })
    }
}
