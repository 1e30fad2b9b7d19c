//! IQ3_S: 256-value super-blocks of eight 32-value sub-blocks, 3.44 bits per value. Each
//! group of four values has a 9-bit index into [`IQ3S_GRID`] (eight bits in `qs`, one in
//! `qh`); each value a sign bit; each sub-block a 4-bit scale `s`: `x = d · (1 + 2s) · grid ·
//! sign`.
//!
//! The dot product against Q8_K is ggml's: integer sums per sub-block times `2s + 1` and one
//! float multiply-add per super-block.

use half::f16;
use rinfer_formats::QK_K;

use super::iq_grids::{IQ3S_GRID, signed8};
use super::util::nibble;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

mod quantize;

#[cfg(test)]
mod tests;

block_struct! {
    /// One IQ3_S super-block.
    BlockIq3S, 110 bytes {
        /// Super-block scale.
        d: f16,
        /// The low 8 bits of the 64 grid indices.
        qs: [u8; QK_K / 4],
        /// Per sub-block, the high bits of its eight grid indices (entry `k` at bit `k`).
        qh: [u8; QK_K / 32],
        /// One sign bit per value.
        signs: [u8; QK_K / 8],
        /// Per pair of sub-blocks, their 4-bit scales (low nibble first).
        scales: [u8; QK_K / 64],
    }
}

impl BlockIq3S {
    /// The grid index of entry `k` (four values, 0..8) of sub-block `ib`.
    #[inline]
    pub(crate) fn index(&self, ib: usize, k: usize) -> usize {
        self.qs[8 * ib + k] as usize | ((self.qh[ib] as usize >> k) & 1) << 8
    }
}

signed_grid_format! {
    BlockIq3S: Iq3S, 4 groups per scale, value factor 2.0;

    fn group(&self, g: usize) -> [i8; 8] {
        let (ib, l) = (g / 4, g % 4);
        let entry = |k: usize| IQ3S_GRID[self.index(ib, 2 * l + k)] as u64;
        signed8(entry(0) | entry(1) << 32, self.signs[4 * ib + l])
    }

    fn level(&self, ib: usize) -> u8 {
        nibble(&self.scales, ib)
    }
}
