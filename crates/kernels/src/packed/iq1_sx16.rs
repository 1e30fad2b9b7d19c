//! IQ1_S repacked sixteen rows at a time for AVX-512: the grid indices in the shared
//! layout (`iq1_grid`), whose per-sub-block words keep IQ1_S's own `qh` words whole (scale at
//! bits 12–14, the shift's sign at bit 15), and the rows' f16 scales side by side: the
//! source's size.
//!
//! The arithmetic, which the SIMD kernel reproduces bit for bit, is the row-major reference's:
//! per row and super-block the exact integers `sumi = Σ_j (2s_j + 1)·Σ g·a` (grid values `g`)
//! and `shift = Σ_j (2s_j + 1)·σ_j·Σ_j a` (shift signs `σ_j`, activation sums from Q8_K's
//! `bsums`), then `acc = acc + (d_w·d_a)·(sumi + δ·shift)` in f32, super-blocks in order.

use super::iq1_grid::GridIndices;
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::iq1_s::BlockIq1S;
use crate::quant::q8_k::BlockQ8K;

packed_format! {
    /// One super-block of sixteen rows.
    BlockIq1Sx16: BlockIq1S => BlockQ8K, scale d {
        /// The grid indices; each word's top bits are the sub-block's scale and shift sign.
        grid: GridIndices,
    }
    fn pack_row(&mut self, i, block) {
        for (g, &q) in block.qs.iter().enumerate() {
            self.grid.qs[g][i] = q;
        }
        for (j, &h) in block.qh.iter().enumerate() {
            self.grid.qh[j][i] = h;
        }
    }
}

#[cfg(test)]
impl BlockIq1Sx16 {
    /// Row `i`'s multiplier `2s + 1` of sub-block `j`.
    pub(crate) fn scale(&self, i: usize, j: usize) -> i32 {
        2 * (self.grid.own_bits(i, j) & 7) as i32 + 1
    }

    /// The sign of row `i`'s shift in sub-block `j`.
    pub(crate) fn delta_sign(&self, i: usize, j: usize) -> i32 {
        self.grid.shift_sign(i, j, 3)
    }
}

/// The scalar reference (tests only), which the SIMD kernel reproduces bit for bit.
#[cfg(test)]
impl super::reference::RowReference for BlockIq1Sx16 {
    fn fold_row(&self, acc: f32, i: usize, y: &BlockQ8K, _: &[BlockSummary]) -> f32 {
        use crate::quant::iq1_s::DELTA;
        let (mut sumi, mut shift) = (0i32, 0i32);
        for (j, q8) in y.qs.chunks_exact(32).enumerate() {
            let lsum: i32 = (0..32)
                .map(|v| {
                    let g = self.grid.entry(i, 4 * j + v / 8).to_le_bytes()[v % 8];
                    g as i8 as i32 * q8[v] as i32
                })
                .sum();
            sumi += self.scale(i, j) * lsum;
            let a_sum = y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32;
            shift += self.scale(i, j) * self.delta_sign(i, j) * a_sum;
        }
        let d = half::f16::from_bits(self.d[i]).to_f32() * y.d;
        acc + d * (sumi as f32 + DELTA * shift as f32)
    }
}
