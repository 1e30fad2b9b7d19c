//! IQ2_XXS repacked sixteen rows at a time for AVX-512 in the layout of `iq2_grid`: one
//! index byte and one complete sign byte per group of eight, the eight 32-value runs' levels as
//! nibbles (70 bytes per row and super-block for the source's 66).

use super::iq2_grid::{grid_rows, set_level};
use crate::quant::iq_grids::{self, KSIGNS};
use crate::quant::iq2_xxs::BlockIq2Xxs;
use crate::quant::signed_grid::SignedGrid;

/// Scale runs of a super-block (32 values each).
const RUNS: usize = 8;

grid_rows! {
    /// One super-block of sixteen rows.
    BlockIq2Xxsx16: BlockIq2Xxs, extra row bytes 4, runs RUNS, high bits 0,
        grid iq_grids::IQ2XXS_GRID, packed grid iq_grids::IQ2XXS_PACKED;
    fn pack_row(&mut self, i, block) {
        for r in 0..RUNS {
            let (grid, signs) = block.sub_block(r);
            for l in 0..4 {
                let index = (grid >> (8 * l)) as u8 as usize;
                let signs = KSIGNS[(signs >> (7 * l)) as usize & 127];
                self.groups.set(i, 4 * r + l, index, signs);
            }
            set_level(&mut self.levels, RUNS, i, r, block.level(r));
        }
    }
}
