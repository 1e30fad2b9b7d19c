//! IQ2_S: 256-value super-blocks of eight 32-value sub-blocks, 2.5 bits per value. Each group
//! of eight values has a 10-bit index into [`IQ2S_GRID`] (eight bits in `qs`, two in `qh`) and
//! a byte of eight sign bits; each half sub-block of 16 values has a 4-bit scale `s`:
//! `x = d · (0.5 + s) / 4 · grid · sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per half sub-block times `2s + 1`, one
//! float multiply-add per super-block, and the factor 1/8 at the end.

use half::f16;
use rinfer_formats::QK_K;

use super::iq_grids::{IQ2S_GRID, signed8};
use super::util::nibble;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ2_S super-block.
    BlockIq2S, 82 bytes {
        /// Super-block scale.
        d: f16,
        /// The low 8 bits of the 32 grid indices, then the 32 sign bytes.
        qs: [u8; QK_K / 4],
        /// Per sub-block, the high 2 bits of its four grid indices (group `l` at bits `2l`).
        qh: [u8; QK_K / 32],
        /// Per sub-block: the scales of its first (low nibble) and second (high) 16 values.
        scales: [u8; QK_K / 32],
    }
}

impl BlockIq2S {
    /// The grid index of group `g` (eight values, 0..32).
    #[inline]
    pub(crate) fn index(&self, g: usize) -> usize {
        self.qs[g] as usize | ((self.qh[g / 4] as usize >> (2 * (g % 4))) & 3) << 8
    }

    /// The sign byte of group `g`.
    #[inline]
    pub(crate) fn signs(&self, g: usize) -> u8 {
        self.qs[QK_K / 8 + g]
    }
}

signed_grid_format! {
    BlockIq2S: Iq2S, 2 groups per scale, value factor 0.25;

    fn group(&self, g: usize) -> [i8; 8] {
        signed8(IQ2S_GRID[self.index(g)], self.signs(g))
    }

    fn level(&self, h: usize) -> u8 {
        nibble(&self.scales, h)
    }
}
