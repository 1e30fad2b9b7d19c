//! IQ2_XXS repacked sixteen rows at a time for AVX-512 in the layout of `iq2_grid`: one
//! index byte and one complete sign byte per group of eight, the eight 32-value runs' levels as
//! nibbles (70 bytes per row and super-block for the source's 66).

use bytemuck::{Pod, Zeroable};

use super::iq2_grid::{GridGroups, GridRows, set_level};
use super::{PackedFormat, ROWS};
use crate::quant::iq_grids::{IQ2XXS_PACKED, KSIGNS};
use crate::quant::iq2_xxs::BlockIq2Xxs;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;

/// Scale runs of a super-block (32 values each).
const RUNS: usize = 8;

/// One super-block of sixteen rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub(crate) struct BlockIq2Xxsx16 {
    /// Each row's f16 super-block scale (bits).
    pub(crate) d: [u16; ROWS],
    /// `levels[j][i]`: row `i`'s levels of runs `j` (low nibble) and `j + 4` (high).
    pub(crate) levels: [[u8; ROWS]; RUNS / 2],
    /// The grid indices and sign bytes.
    pub(crate) groups: GridGroups,
}

impl PackedFormat for BlockIq2Xxsx16 {
    type Source = BlockIq2Xxs;
    type Act = BlockQ8K;
    const EXTRA_ROW_BYTES: usize = 4;
    fn pack_row(&mut self, i: usize, block: &BlockIq2Xxs) {
        self.d[i] = block.d.to_bits();
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

impl GridRows for BlockIq2Xxsx16 {
    #[cfg(test)]
    const GRID: &'static [u64] = &crate::quant::iq_grids::IQ2XXS_GRID;
    const RUNS: usize = RUNS;
    const HIGH_BITS: usize = 0;
    const DOT_FACTOR: f32 = BlockIq2Xxs::DOT_FACTOR;
    const PACKED_GRID: &'static [u16] = &IQ2XXS_PACKED;

    fn d(&self) -> &[u16; ROWS] {
        &self.d
    }
    fn levels(&self) -> &[[u8; ROWS]] {
        &self.levels
    }
    fn high(&self) -> &[[u8; ROWS]] {
        &[]
    }
    fn groups(&self) -> &GridGroups {
        &self.groups
    }
}
