//! IQ3_S repacked sixteen rows at a time for AVX-512, in the layout it shares with IQ3_XXS
//! (`grid_quads`, whose doc has the arithmetic), plus the ninth bit of each grid index: per
//! group one `u16` holding the sixteen rows' bits, the mask that adds 256 to their indices. The
//! same 110 bytes per row as the source.

use super::grid_quads::{self, GROUPS, grid_quad_rows};
use crate::quant::iq_grids;
use crate::quant::iq3_s::BlockIq3S;
use crate::quant::signed_grid::SignedGrid;

grid_quad_rows! {
    /// One super-block of sixteen rows.
    BlockIq3Sx16: BlockIq3S, values iq_grids::IQ3S_VALUES, grid iq_grids::IQ3S_GRID,
        packed grid iq_grids::IQ3S_PACKED, ninth bits high {
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
