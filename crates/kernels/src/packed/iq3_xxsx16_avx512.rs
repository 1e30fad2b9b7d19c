//! AVX-512 kernel of [`BlockIq3Xxsx16`]: the `grid_quads` kernel over IQ3_XXS's grid.

use super::grid_quads_avx512::dot_tokens;
use super::iq3_xxsx16::BlockIq3Xxsx16;

super_block_dot_group!(BlockIq3Xxsx16, |d, w, a, s, out| {
    for_tokens!(out.len(), 4, dot_tokens[BlockIq3Xxsx16, _](d, w, a, s, out))
});
