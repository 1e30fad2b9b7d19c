//! IQ3_XXS repacked sixteen rows at a time for AVX-512, in the layout it shares with IQ3_S
//! (`grid_quads`, whose doc has the arithmetic): the grid indices as stored, the seven stored
//! sign bits of each eight values completed to eight (`KSIGNS`), the 4-bit levels as stored.

use super::grid_quads::{self, GridQuadRows, GridQuads};
#[cfg(test)]
use crate::operands::BlockSummary;
use crate::quant::iq_grids::{IQ3XXS_PACKED, IQ3XXS_VALUES, KSIGNS};
use crate::quant::iq3_xxs::BlockIq3Xxs;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;

packed_format! {
    /// One super-block of sixteen rows.
    // The sign bits stored whole: four bytes per row over the source's 98.
    BlockIq3Xxsx16: BlockIq3Xxs => BlockQ8K, extra row bytes 4 {
        /// The indices, signs and levels.
        quads: GridQuads,
    }
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

impl GridQuadRows for BlockIq3Xxsx16 {
    const DOT_FACTOR: f32 = BlockIq3Xxs::DOT_FACTOR;
    const VALUES: [u8; 8] = IQ3XXS_VALUES;
    const PACKED_GRID: &'static [u16] = &IQ3XXS_PACKED;
    #[cfg(test)]
    fn grid() -> &'static [u32] {
        &crate::quant::iq_grids::IQ3XXS_GRID
    }
    fn quads(&self) -> &GridQuads {
        &self.quads
    }
}

/// Scalar reference (tests only): the sixteen rows of `w` (one row group, `nb` super-blocks)
/// against each of the `out.len()` tokens of `a` (`nb` Q8_K blocks each).
#[cfg(test)]
pub(crate) fn dot_group(
    w: &[BlockIq3Xxsx16],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; super::ROWS]],
) {
    grid_quads::dot_group(w, a, s, out);
}
