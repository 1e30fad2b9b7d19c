//! IQ1_M repacked sixteen rows at a time for AVX-512: the grid indices in the shared
//! layout (`iq1_grid`), whose per-sub-block words carry the shift signs of their four groups
//! (group `l` at bit `12 + l`: negative), and each row's four scale words as IQ1_M stores them
//! (the 3-bit scales of its sixteen 16-value halves and the nibbles of its f16 scale): the
//! source's size.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit, is the row-major reference's:
//! per row and super-block the exact integers `grid = Σ_g (2s_h + 1)·Σ g·a` over the groups
//! `g` (grid values `g`, `h` the group's half) and `shift = Σ_g (2s_h + 1)·σ_g·Σ_g a` (shift
//! signs `σ_g`), then `acc = acc + (d_w·d_a)·(grid + δ·shift)` in f32, super-blocks in order.

use super::ROWS;
use super::iq1_grid::GridIndices;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::iq1_m::BlockIq1M;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::util::nibble;

packed_format! {
    /// One super-block of sixteen rows.
    BlockIq1Mx16: BlockIq1M => BlockQ8K {
        /// The grid indices; each word's top bits are the signs of its groups' shifts.
        grid: GridIndices,
        /// `scales[k][i]`: row `i`'s scale word `k`: the scales of halves `4k..4k + 4` at bits
        /// `3·(h − 4k)`, bits `4k..4k + 4` of the f16 scale at bits 12–15.
        scales: [[u16; ROWS]; 4],
    }
    fn pack_row(&mut self, i, block) {
        for (g, &q) in block.qs.iter().enumerate() {
            let high = nibble(&block.qh, g) as usize;
            self.grid.set(i, g, q as usize | (high & 7) << 8);
            self.grid.qh[g / 4][i] |= ((high >> 3) as u16) << (12 + g % 4);
        }
        for (k, scales) in self.scales.iter_mut().enumerate() {
            scales[i] = u16::from_le_bytes([block.scales[2 * k], block.scales[2 * k + 1]]);
        }
    }
}

#[cfg(test)]
impl BlockIq1Mx16 {
    /// Row `i`'s f16 super-block scale (bits).
    pub(crate) fn d(&self, i: usize) -> u16 {
        (0..4).fold(0, |d, k| d | (self.scales[k][i] >> 12) << (4 * k))
    }

    /// Row `i`'s multiplier `2s + 1` of half `h` (16 values).
    pub(crate) fn scale(&self, i: usize, h: usize) -> i32 {
        2 * ((self.scales[h / 4][i] >> (3 * (h % 4))) & 7) as i32 + 1
    }

    /// The sign of row `i`'s shift in group `g`.
    pub(crate) fn delta_sign(&self, i: usize, g: usize) -> i32 {
        self.grid.shift_sign(i, g / 4, g % 4)
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockIq1Mx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        use crate::quant::iq1_s::DELTA;
        let (mut grid_sum, mut shift_sum) = (0i32, 0i32);
        for (g, q8) in y.qs.chunks_exact(8).enumerate() {
            let v = self.grid.entry(i, g).to_le_bytes();
            let lsum1: i32 = v
                .iter()
                .zip(q8)
                .map(|(&v, &q)| v as i8 as i32 * q as i32)
                .sum();
            let lsum2: i32 = q8.iter().map(|&q| q as i32).sum();
            grid_sum += lsum1 * self.scale(i, g / 2);
            shift_sum += lsum2 * self.delta_sign(i, g) * self.scale(i, g / 2);
        }
        let d = half::f16::from_bits(self.d(i)).to_f32() * y.d;
        acc + d * (grid_sum as f32 + DELTA * shift_sum as f32)
    }
}
