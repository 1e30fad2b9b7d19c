//! IQ2_S repacked sixteen rows at a time for AVX-512 in the layout of `iq2_grid`: per
//! group of eight the low byte of the 10-bit index and the sign byte, the top two bits of four
//! groups in one byte per row (the source's `qh`), the sixteen 16-value runs' levels as nibbles
//! (82 bytes per row and super-block, the source's size).

use bytemuck::{Pod, Zeroable};

use super::iq2_grid::{GROUPS, GridGroups, GridRows, set_high, set_level};
use super::{PackedFormat, ROWS};
use crate::quant::iq_grids::IQ2S_PACKED;
use crate::quant::iq2_s::BlockIq2S;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;

/// Scale runs of a super-block (16 values each).
const RUNS: usize = 16;

/// Bits of a grid index above its low byte.
const HIGH_BITS: usize = 2;

/// One super-block of sixteen rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub(crate) struct BlockIq2Sx16 {
    /// Each row's f16 super-block scale (bits).
    pub(crate) d: [u16; ROWS],
    /// `levels[j][i]`: row `i`'s levels of runs `j` (low nibble) and `j + 8` (high).
    pub(crate) levels: [[u8; ROWS]; RUNS / 2],
    /// `high[n][i]`: bits `2k..2k + 2` are the top bits of row `i`'s index of group `4n + k`.
    pub(crate) high: [[u8; ROWS]; GROUPS * HIGH_BITS / 8],
    /// The grid indices' low bytes and the sign bytes.
    pub(crate) groups: GridGroups,
}

impl PackedFormat for BlockIq2Sx16 {
    type Source = BlockIq2S;
    type Act = BlockQ8K;
    fn pack_row(&mut self, i: usize, block: &BlockIq2S) {
        self.d[i] = block.d.to_bits();
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

impl GridRows for BlockIq2Sx16 {
    #[cfg(test)]
    const GRID: &'static [u64] = &crate::quant::iq_grids::IQ2S_GRID;
    const RUNS: usize = RUNS;
    const HIGH_BITS: usize = HIGH_BITS;
    const DOT_FACTOR: f32 = BlockIq2S::DOT_FACTOR;
    const PACKED_GRID: &'static [u16] = &IQ2S_PACKED;

    fn d(&self) -> &[u16; ROWS] {
        &self.d
    }
    fn levels(&self) -> &[[u8; ROWS]] {
        &self.levels
    }
    fn high(&self) -> &[[u8; ROWS]] {
        &self.high
    }
    fn groups(&self) -> &GridGroups {
        &self.groups
    }
}
