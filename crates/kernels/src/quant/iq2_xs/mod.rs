//! IQ2_XS: 256-value super-blocks of eight 32-value sub-blocks, 2.31 bits per value. Each
//! group of eight values is one 16-bit word: a 9-bit index into [`IQ2XS_GRID`] and a 7-bit sign
//! group ([`KSIGNS`]); each half sub-block of 16 values has a 4-bit scale `s`:
//! `x = d · (0.5 + s) / 4 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per half sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/8 at the end.

use half::f16;
use rinfer_formats::QK_K;

use super::iq_grids::{IQ2XS_GRID, KSIGNS, signed8};
use super::util::nibble;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ2_XS super-block.
    BlockIq2Xs, 74 bytes {
        /// Super-block scale.
        d: f16,
        /// Per group of eight values: grid index (low 9 bits) and sign group (high 7 bits).
        qs: [u16; QK_K / 8],
        /// Per sub-block: the scales of its first (low nibble) and second (high) 16 values.
        scales: [u8; QK_K / 32],
    }
}

signed_grid_format! {
    BlockIq2Xs: Iq2Xs, 2 groups per scale, value factor 0.25;

    fn group(&self, g: usize) -> [i8; 8] {
        let q = self.qs[g];
        signed8(IQ2XS_GRID[(q & 511) as usize], KSIGNS[(q >> 9) as usize])
    }

    fn level(&self, h: usize) -> u8 {
        nibble(&self.scales, h)
    }
}
