//! AVX-512 kernel of [`BlockIq3Sx16`]: the `grid_quads` kernel over IQ3_S's grid, each
//! group's ninth index bits or-ed in as 256 under their mask.

use super::grid_quads::GridQuadRows;
use super::grid_quads_avx512::add_block;
use super::iq3_sx16::BlockIq3Sx16;

super_block_dot_group!(BlockIq3Sx16, add_block, times BlockIq3Sx16::DOT_FACTOR);
