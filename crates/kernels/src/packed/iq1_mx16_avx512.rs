//! AVX-512 kernel of [`BlockIq1Mx16`]: the kernel IQ1 shares (`iq1_grid_avx512`), with
//! each half sub-block's scale read from the rows' scale words and each group's shift sign
//! from the top bits of its index words.

use std::arch::x86_64::*;

use super::iq1_grid::GridIndices;
use super::iq1_grid_avx512::{Iq1Layout, SubBlock, add_block};
use super::iq1_mx16::BlockIq1Mx16;

super_block_dot_group!(BlockIq1Mx16, add_block);

impl BlockIq1Mx16 {
    /// Scale word `k` of the sixteen rows, one 32-bit lane per row.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn scale_words(&self, k: usize) -> __m512i {
        // SAFETY: reads exactly the 32 bytes of word `k` of each row; unaligned is allowed.
        _mm512_cvtepu16_epi32(unsafe { _mm256_loadu_si256(self.scales[k].as_ptr().cast()) })
    }
}

impl Iq1Layout for BlockIq1Mx16 {
    fn grid(&self) -> &GridIndices {
        &self.grid
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn scales(&self) -> __m512 {
        let w = [0, 1, 2, 3].map(|k| self.scale_words(k));
        let nibbles = _mm512_set1_epi32(0xF);
        let low = _mm512_or_si512(
            _mm512_srli_epi32::<12>(w[0]),
            _mm512_and_si512(
                _mm512_srli_epi32::<8>(w[1]),
                _mm512_slli_epi32::<4>(nibbles),
            ),
        );
        let high = _mm512_or_si512(
            _mm512_and_si512(
                _mm512_srli_epi32::<4>(w[2]),
                _mm512_slli_epi32::<8>(nibbles),
            ),
            _mm512_and_si512(w[3], _mm512_slli_epi32::<12>(nibbles)),
        );
        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_or_si512(low, high)))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn sub_block(&self, j: usize, words: __m512i) -> SubBlock {
        // 2s + 1 of halves 2j and 2j + 1, whose s lie at bits b = 3·(2j mod 4) and b + 3:
        // ((w >> (b − 1)) & 0xE) | 1.
        let w = self.scale_words(j / 2);
        let (first, second) = if j.is_multiple_of(2) {
            (_mm512_slli_epi32::<1>(w), _mm512_srli_epi32::<2>(w))
        } else {
            (_mm512_srli_epi32::<5>(w), _mm512_srli_epi32::<8>(w))
        };
        let (e, one) = (_mm512_set1_epi32(0xE), _mm512_set1_epi32(1));
        let positive = |l: i32| _mm512_testn_epi32_mask(words, _mm512_set1_epi32(1 << (12 + l)));
        SubBlock {
            scales: [
                _mm512_ternarylogic_epi32::<0xEA>(first, e, one),
                _mm512_ternarylogic_epi32::<0xEA>(second, e, one),
            ],
            positive: [positive(0), positive(1), positive(2), positive(3)],
        }
    }
}
