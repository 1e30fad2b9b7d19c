//! AVX-512 kernel of [`BlockIq2Sx16`]: the shared kernel of the packed IQ2 layouts
//! (`iq2_grid_avx512`).

use super::iq2_grid_avx512::dot_tokens;
use super::iq2_sx16::BlockIq2Sx16;

super_block_dot_group!(BlockIq2Sx16, |d, w, a, _s, out| {
    for_tokens!(out.len(), 4, dot_tokens[BlockIq2Sx16, _](d, w, a, out))
});
