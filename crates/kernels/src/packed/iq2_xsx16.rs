//! IQ2_XS repacked sixteen rows at a time for AVX-512 in the layout of `iq2_grid`: per
//! group of eight the low byte of the 9-bit index and a complete sign byte, the ninth bits of
//! eight groups in one byte per row, the sixteen 16-value runs' levels as nibbles (78 bytes per
//! row and super-block for the source's 74).

use super::iq2_grid::{grid_rows, set_high, set_level};
use crate::quant::iq_grids::{self, KSIGNS};
use crate::quant::iq2_xs::BlockIq2Xs;
use crate::quant::signed_grid::SignedGrid;

/// Scale runs of a super-block (16 values each).
const RUNS: usize = 16;

/// Bits of a grid index above its low byte.
const HIGH_BITS: usize = 1;

grid_rows! {
    /// One super-block of sixteen rows.
    BlockIq2Xsx16: BlockIq2Xs, extra row bytes 4, runs RUNS, high bits HIGH_BITS,
        grid iq_grids::IQ2XS_GRID, packed grid iq_grids::IQ2XS_PACKED;
    fn pack_row(&mut self, i, block) {
        for (g, &q) in block.qs.iter().enumerate() {
            let index = (q & 511) as usize;
            self.groups.set(i, g, index, KSIGNS[(q >> 9) as usize]);
            set_high(&mut self.high, HIGH_BITS, i, g, index);
        }
        for r in 0..RUNS {
            set_level(&mut self.levels, RUNS, i, r, block.level(r));
        }
    }
}
