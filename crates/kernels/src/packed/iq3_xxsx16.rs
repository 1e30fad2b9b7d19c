//! IQ3_XXS repacked sixteen rows at a time for AVX-512, in the layout it shares with IQ3_S
//! (`grid_quads`, whose doc has the arithmetic): the grid indices as stored, the seven stored
//! sign bits of each eight values completed to eight (`KSIGNS`), the 4-bit levels as stored.

use super::grid_quads::{self, grid_quad_rows};
use crate::quant::iq_grids::{self, KSIGNS};
use crate::quant::iq3_xxs::BlockIq3Xxs;
use crate::quant::signed_grid::SignedGrid;

grid_quad_rows! {
    /// One super-block of sixteen rows.
    // The sign bits stored whole: four bytes per row over the source's 98.
    BlockIq3Xxsx16: BlockIq3Xxs, extra row bytes 4, values iq_grids::IQ3XXS_VALUES,
        grid iq_grids::IQ3XXS_GRID, packed grid iq_grids::IQ3XXS_PACKED {}
    fn pack_row(&mut self, i, block) {
        // Sign byte `n` covers values `8n..8n + 8`: seven bits of sub-block `n / 4`'s word.
        let sign_byte =
            |n: usize| KSIGNS[(block.signs_and_scale(n / 4) >> (7 * (n % 4))) as usize & 127];
        let (index, level) = (|q: usize| block.qs[q], |j: usize| block.level(j));
        grid_quads::pack_row(
            &mut self.quads,
            i,
            block.d.to_bits(),
            index,
            sign_byte,
            level,
        );
    }
}
