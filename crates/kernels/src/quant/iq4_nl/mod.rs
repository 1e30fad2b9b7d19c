//! IQ4_NL: 32 values per block, 4-bit indices into a fixed non-linear table and one f16 scale:
//! `x = d * KVALUES[q]`. Codes are packed as in Q4_0.

use half::f16;

use super::util::split_nibbles;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;
#[cfg(test)]
mod tests;

pub use super::iq4_codes::KVALUES;

block_struct! {
    /// One IQ4_NL block.
    BlockIq4Nl, 18 bytes {
        /// Scale.
        d: f16,
        /// Packed table indices.
        qs: [u8; 16],
    }
}

codes32_format!(BlockIq4Nl: Iq4Nl, |b| split_nibbles(&b.qs).map(|q| KVALUES[q as usize] as i32));
