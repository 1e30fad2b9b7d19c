//! AVX-512 kernel of [`BlockIq1Sx16`]: the kernel IQ1 shares (`iq1_grid_avx512`), with
//! each sub-block's scale and shift sign read from the top bits of its index words.

use std::arch::x86_64::*;

use super::iq1_grid::GridIndices;
use super::iq1_grid_avx512::{Iq1Layout, SubBlock, add_block};
use super::iq1_sx16::BlockIq1Sx16;

super_block_dot_group!(BlockIq1Sx16, add_block);

impl Iq1Layout for BlockIq1Sx16 {
    fn grid(&self) -> &GridIndices {
        &self.grid
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn scales(&self) -> __m512 {
        super::fold_avx512::row_scales(&self.d)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn sub_block(&self, _j: usize, words: __m512i) -> SubBlock {
        // 2s + 1 from the scale s at bits 12–14: ((words >> 11) & 0xE) | 1.
        let scale = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_srli_epi32::<11>(words),
            _mm512_set1_epi32(0xE),
            _mm512_set1_epi32(1),
        );
        let positive = _mm512_testn_epi32_mask(words, _mm512_set1_epi32(0x8000));
        SubBlock {
            scales: [scale; 2],
            positive: [positive; 4],
        }
    }
}
