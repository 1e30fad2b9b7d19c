//! AVX-512 kernel of [`BlockIq2Sx16`]: the shared kernel of the packed IQ2 layouts
//! (`iq2_grid_avx512`).

use super::iq2_grid::GridRows;
use super::iq2_grid_avx512::add_block;
use super::iq2_sx16::BlockIq2Sx16;

super_block_dot_group!(BlockIq2Sx16, add_block, times BlockIq2Sx16::DOT_FACTOR);
