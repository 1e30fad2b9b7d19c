//! IQ3_XXS: 256-value super-blocks of eight 32-value sub-blocks, 3.06 bits per value. Each
//! group of four values is an 8-bit index into [`IQ3XXS_GRID`]; per sub-block one 32-bit word
//! holds four 7-bit sign groups ([`KSIGNS`], one per eight values) and a 4-bit scale `s`:
//! `x = d · (0.5 + s) / 2 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/4 at the end.

use half::f16;
use rinfer_formats::QK_K;

use super::iq_grids::{IQ3XXS_GRID, KSIGNS, signed8};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ3_XXS super-block.
    BlockIq3Xxs, 98 bytes {
        /// Super-block scale.
        d: f16,
        /// The 64 grid indices, then per sub-block a little-endian word of signs and scale.
        qs: [u8; 3 * QK_K / 8],
    }
}

impl BlockIq3Xxs {
    /// Sub-block `ib`'s sign-and-scale word.
    #[inline]
    pub(crate) fn signs_and_scale(&self, ib: usize) -> u32 {
        let at = QK_K / 4 + 4 * ib;
        u32::from_le_bytes([
            self.qs[at],
            self.qs[at + 1],
            self.qs[at + 2],
            self.qs[at + 3],
        ])
    }
}

signed_grid_format! {
    BlockIq3Xxs: Iq3Xxs, 4 groups per scale, value factor 0.5;

    fn group(&self, g: usize) -> [i8; 8] {
        let (ib, l) = (g / 4, g % 4);
        let entry = |k: usize| IQ3XXS_GRID[self.qs[8 * ib + 2 * l + k] as usize] as u64;
        let signs = KSIGNS[(self.signs_and_scale(ib) >> (7 * l)) as usize & 127];
        signed8(entry(0) | entry(1) << 32, signs)
    }

    fn level(&self, s: usize) -> u8 {
        (self.signs_and_scale(s) >> 28) as u8
    }
}
