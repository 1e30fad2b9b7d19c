//! Q5_K repacked sixteen rows at a time for AVX-512: Q4_K's packed layout (`q4_kx16`)
//! for the scales, mins and low four bits, plus the fifth bits.
//!
//! The arithmetic is Q4_K's with codes `q < 32`: per row and super-block the exact integers
//! `S = Σ_j sc_j · Σ q·a` and `M = Σ_j m_j · Σ a`, then `acc = fma(d_w·d_a, S, acc)` and
//! `acc = fma(−(dmin_w·d_a), M, acc)`, super-blocks in order.

use super::q4_kx16::BlockQ4Kx16;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::q5_k::BlockQ5K;
use crate::quant::q8_k::BlockQ8K;

packed_format! {
    /// One super-block of sixteen rows.
    BlockQ5Kx16: BlockQ5K => BlockQ8K, extra row bytes 12 {
        /// Scales, mins and the low four bits of every code, as Q4_K packs them.
        low: BlockQ4Kx16,
        /// Fifth bits: `qh[j]`, byte `4i + jj`, bit `g` is the fifth bit of row `i`'s code
        /// `4g + jj` of sub-block `j`.
        qh: [[u8; 64]; 8],
    }
    fn pack_row(&mut self, i, block) {
        self.low
            .pack_row_parts(i, block.d, block.dmin, &block.scales, &block.qs);
        for (j, qh) in self.qh.iter_mut().enumerate() {
            for jj in 0..4 {
                qh[4 * i + jj] = (0..8)
                    .map(|g| ((block.qh[4 * g + jj] >> j) & 1) << g)
                    .fold(0, |a, b| a | b);
            }
        }
    }
}

impl BlockQ5Kx16 {
    /// Row `i`'s code `l` of sub-block `j` (`0..32`).
    #[cfg(test)]
    pub(crate) fn code(&self, i: usize, j: usize, l: usize) -> i32 {
        let (g, jj) = (l / 4, l % 4);
        self.low.code(i, j, l) | (((self.qh[j][4 * i + jj] >> g) & 1) as i32) << 4
    }
}

/// The scalar reference (tests only), as Q4_K's (`q4_kx16::fold_k_row`).
#[cfg(test)]
impl super::reference::RowReference for BlockQ5Kx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, s: &[BlockSummary]) -> f32 {
        super::q4_kx16::fold_k_row(&self.low, |j, l| self.code(i, j, l), acc, i, y, s)
    }
}
