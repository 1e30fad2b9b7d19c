//! AVX-512 kernel of [`BlockIq2Xsx16`]: the shared kernel of the packed IQ2 layouts
//! (`iq2_grid_avx512`).

use super::iq2_grid_avx512::dot_tokens;
use super::iq2_xsx16::BlockIq2Xsx16;

super_block_dot_group!(BlockIq2Xsx16, |d, w, a, _s, out| {
    for_tokens!(out.len(), 4, dot_tokens[BlockIq2Xsx16, _](d, w, a, out))
});
