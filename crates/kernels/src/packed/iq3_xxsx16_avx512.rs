//! AVX-512 kernel of [`BlockIq3Xxsx16`]: the `grid_quads` kernel over IQ3_XXS's grid.

use super::grid_quads::GridQuadRows;
use super::grid_quads_avx512::add_block;
use super::iq3_xxsx16::BlockIq3Xxsx16;

super_block_dot_group!(BlockIq3Xxsx16, add_block, times BlockIq3Xxsx16::DOT_FACTOR);
