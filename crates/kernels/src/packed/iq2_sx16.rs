//! IQ2_S repacked sixteen rows at a time for AVX-512 in the layout of `iq2_grid`: per
//! group of eight the low byte of the 10-bit index and the sign byte, the top two bits of four
//! groups in one byte per row (the source's `qh`), the sixteen 16-value runs' levels as nibbles
//! (82 bytes per row and super-block, the source's size).

use super::iq2_grid::{GROUPS, grid_rows, set_high, set_level};
use crate::quant::iq_grids;
use crate::quant::iq2_s::BlockIq2S;
use crate::quant::signed_grid::SignedGrid;

/// Scale runs of a super-block (16 values each).
const RUNS: usize = 16;

/// Bits of a grid index above its low byte.
const HIGH_BITS: usize = 2;

grid_rows! {
    /// One super-block of sixteen rows.
    BlockIq2Sx16: BlockIq2S, runs RUNS, high bits HIGH_BITS,
        grid iq_grids::IQ2S_GRID, packed grid iq_grids::IQ2S_PACKED;
    fn pack_row(&mut self, i, block) {
        for g in 0..GROUPS {
            let index = block.index(g);
            self.groups.set(i, g, index, block.signs(g));
            set_high(&mut self.high, HIGH_BITS, i, g, index);
        }
        for r in 0..RUNS {
            set_level(&mut self.levels, RUNS, i, r, block.level(r));
        }
    }
}
