//! Q4_1: 32 values per block, 4-bit codes, f16 scale and min: `x = d * q + m`.
//!
//! Dots run against Q8_1 activations, whose stored sum `s` carries the min term, as in ggml.

use half::f16;
use rinfer_formats::GgmlType;

use super::q8_1::BlockQ8_1;
use super::util::{affine_code, min_max, pack_split_nibbles, scale_codes_min, split_nibbles};
use super::{BlockFormat, Quantize, VecDot, sum_blocks};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q4_1 block, codes packed as in Q4_0.
    BlockQ4_1, 20 bytes {
        /// Scale.
        d: f16,
        /// Min (added).
        m: f16,
        /// Packed codes.
        qs: [u8; 16],
    }
}

impl BlockFormat for BlockQ4_1 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    const ELEMS: usize = 32;

    fn dequantize(&self, out: &mut [f32]) {
        let codes = split_nibbles(&self.qs).map(i32::from);
        scale_codes_min(self.d.to_f32(), self.m.to_f32(), codes, out);
    }
}

impl Quantize for BlockQ4_1 {
    fn quantize(x: &[f32]) -> Self {
        let (min, max) = min_max(x, (f32::MAX, -f32::MAX));
        let (d, code) = affine_code(min, max, 15);
        let l: [u8; 32] = std::array::from_fn(|j| code(x[j]) as u8);
        let mut qs = [0u8; 16];
        pack_split_nibbles(&l, &mut qs);
        BlockQ4_1 {
            d: f16::from_f32(d),
            m: f16::from_f32(min),
            qs,
        }
    }
}

impl VecDot for BlockQ4_1 {
    type Activation = BlockQ8_1;

    fn vec_dot(w: &[Self], a: &[BlockQ8_1]) -> f32 {
        sum_blocks(w, a, |x, y| {
            let codes = split_nibbles(&x.qs).map(i32::from);
            y.affine_dot(x.d.to_f32(), x.m.to_f32(), codes)
        })
    }
}
