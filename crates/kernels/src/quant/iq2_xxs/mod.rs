//! IQ2_XXS: 256-value super-blocks of eight 32-value sub-blocks, 2.06 bits per value. Each
//! sub-block stores four 8-bit indices into [`IQ2XXS_GRID`] (eight magnitudes each), four
//! 7-bit sign groups ([`KSIGNS`]) and a 4-bit scale `s`: `x = d · (0.5 + s) / 4 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/8 at the end.

use half::f16;
use rinfer_formats::QK_K;

use super::iq_grids::{IQ2XXS_GRID, KSIGNS, signed8};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ2_XXS super-block.
    BlockIq2Xxs, 66 bytes {
        /// Super-block scale.
        d: f16,
        /// Per sub-block four words: two of grid indices (one byte each), two of four 7-bit sign
        /// groups and the 4-bit scale in the top bits.
        qs: [u16; QK_K / 8],
    }
}

impl BlockIq2Xxs {
    /// Sub-block `ib`'s grid indices (bytes) and its sign-and-scale word.
    #[inline]
    pub(crate) fn sub_block(&self, ib: usize) -> (u32, u32) {
        let q = &self.qs[4 * ib..4 * ib + 4];
        let word = |lo: u16, hi: u16| lo as u32 | (hi as u32) << 16;
        (word(q[0], q[1]), word(q[2], q[3]))
    }
}

signed_grid_format! {
    BlockIq2Xxs: Iq2Xxs, 4 groups per scale, value factor 0.25;

    fn group(&self, g: usize) -> [i8; 8] {
        let (ib, l) = (g / 4, g % 4);
        let (grid, signs) = self.sub_block(ib);
        let index = (grid >> (8 * l)) as u8 as usize;
        signed8(
            IQ2XXS_GRID[index],
            KSIGNS[(signs >> (7 * l)) as usize & 127],
        )
    }

    fn level(&self, s: usize) -> u8 {
        (self.sub_block(s).1 >> 28) as u8
    }
}
