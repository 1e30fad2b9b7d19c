//! IQ3_S repacked sixteen rows at a time for AVX-512, in the layout it shares with IQ3_XXS
//! (`grid_quads`, whose doc has the arithmetic), plus the ninth bit of each grid index: per
//! group one `u16` holding the sixteen rows' bits, the mask that adds 256 to their indices. The
//! same 110 bytes per row as the source.

use super::grid_quads::{self, GROUPS, GridQuadRows, GridQuads};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::iq_grids::{IQ3S_PACKED, IQ3S_VALUES};
use crate::quant::iq3_s::BlockIq3S;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;

packed_format! {
    /// One super-block of sixteen rows.
    BlockIq3Sx16: BlockIq3S => BlockQ8K {
        /// The low eight bits of the indices, the signs and the levels.
        quads: GridQuads,
        /// Bit `i` of `high[q]`: the ninth bit of row `i`'s grid index of group `q`.
        high: [u16; GROUPS],
    }
    fn pack_row(&mut self, i, block) {
        let index = |q: usize| block.index(q / 8, q % 8);
        for (q, high) in self.high.iter_mut().enumerate() {
            *high |= ((index(q) >> 8) as u16) << i;
        }
        let (sign_byte, level) = (|n: usize| block.signs[n], |j: usize| block.level(j));
        let low = |q: usize| index(q) as u8;
        grid_quads::pack_row(&mut self.quads, i, block.d.to_bits(), low, sign_byte, level);
    }
}

impl GridQuadRows for BlockIq3Sx16 {
    const DOT_FACTOR: f32 = BlockIq3S::DOT_FACTOR;
    const VALUES: [u8; 8] = IQ3S_VALUES;
    const PACKED_GRID: &'static [u16] = &IQ3S_PACKED;
    #[cfg(test)]
    fn grid() -> &'static [u32] {
        &crate::quant::iq_grids::IQ3S_GRID
    }
    fn quads(&self) -> &GridQuads {
        &self.quads
    }
    fn high(&self) -> Option<&[u16; GROUPS]> {
        Some(&self.high)
    }
}

/// Scalar reference (tests only): the sixteen rows of `w` (one row group, `nb` super-blocks)
/// against each of the `out.len()` tokens of `a` (`nb` Q8_K blocks each).
#[cfg(test)]
pub(crate) fn dot_group(
    w: &[BlockIq3Sx16],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; super::ROWS]],
) {
    grid_quads::dot_group(w, a, s, out);
}
