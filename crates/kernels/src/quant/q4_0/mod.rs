//! Q4_0: 32 values per block, 4-bit codes and one f16 scale: `x = d * (q - 8)`.

use half::f16;

use super::Quantize;
use super::util::{centred_code, pack_split_nibbles, split_nibbles};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q4_0 block: element `j` in the low nibble of `qs[j]`, element `j + 16` in the high one.
    BlockQ4_0, 18 bytes {
        /// Scale.
        d: f16,
        /// Packed codes.
        qs: [u8; 16],
    }
}

codes32_format!(BlockQ4_0: Q4_0, |b| split_nibbles(&b.qs).map(|q| q as i32 - 8));

impl Quantize for BlockQ4_0 {
    fn quantize(x: &[f32]) -> Self {
        let (d, code) = centred_code(x, 8);
        let l: [u8; 32] = std::array::from_fn(|j| code(x[j]) as u8);
        let mut qs = [0u8; 16];
        pack_split_nibbles(&l, &mut qs);
        BlockQ4_0 {
            d: f16::from_f32(d),
            qs,
        }
    }
}
