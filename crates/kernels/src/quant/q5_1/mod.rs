//! Q5_1: 32 values per block, 5-bit codes (packed as Q5_0), f16 scale and min: `x = d * q + m`.
//!
//! Dots run against Q8_1 activations, as in ggml.

use half::f16;

use super::Quantize;
use super::q5_0::{five_bit_codes, pack_five_bits};
use super::util::{affine_code, min_max};

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

codes32_format!(BlockQ5_1: Q5_1, affine, |b| five_bit_codes(&b.qs, b.qh));

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
