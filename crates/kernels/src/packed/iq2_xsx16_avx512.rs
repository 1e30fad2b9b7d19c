//! AVX-512 kernel of [`BlockIq2Xsx16`]: the shared kernel of the packed IQ2 layouts
//! (`iq2_grid_avx512`).

use super::iq2_grid::GridRows;
use super::iq2_grid_avx512::add_block;
use super::iq2_xsx16::BlockIq2Xsx16;

super_block_dot_group!(BlockIq2Xsx16, add_block, times BlockIq2Xsx16::DOT_FACTOR);
