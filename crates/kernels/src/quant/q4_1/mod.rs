//! Q4_1: 32 values per block, 4-bit codes, f16 scale and min: `x = d * q + m`.
//!
//! Dots run against Q8_1 activations, whose stored sum `s` carries the min term, as in ggml.

use half::f16;

use super::Quantize;
use super::util::{affine_code, min_max, pack_split_nibbles, split_nibbles};

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

codes32_format!(BlockQ4_1: Q4_1, affine, |b| split_nibbles(&b.qs).map(i32::from));

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
