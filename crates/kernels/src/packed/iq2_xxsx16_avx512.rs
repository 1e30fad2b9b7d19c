//! AVX-512 kernel of [`BlockIq2Xxsx16`]: the shared kernel of the packed IQ2 layouts
//! (`iq2_grid_avx512`).

use super::iq2_grid::GridRows;
use super::iq2_grid_avx512::add_block;
use super::iq2_xxsx16::BlockIq2Xxsx16;

super_block_dot_group!(BlockIq2Xxsx16, add_block, times BlockIq2Xxsx16::DOT_FACTOR);
