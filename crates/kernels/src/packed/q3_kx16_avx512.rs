//! AVX-512 kernel of [`BlockQ3Kx16`]: each group's codes are decoded once (two low bits,
//! then the high bit moved to bit 2) and dotted with every token of the call, sixteen rows per
//! instruction; the offset and the group scales are applied in integers.

use std::arch::x86_64::*;

use super::byte_dot::{negated_scale_pairs, word_pair};
use super::code_bits_avx512::or_masked_each;
use super::fold_avx512::{Sign, add_scaled};
use super::q3_kx16::BlockQ3Kx16;
use super::two_bits::GROUPS;
use super::two_bits_avx512::{group_codes, scaled_group_dot};
use crate::quant::x86::prefetch_part_ahead;

super_block_dot_group!(BlockQ3Kx16, add_block);

/// The four code vectors (`0..8`) of group `g`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn codes(x: &BlockQ3Kx16, g: usize) -> [__m512i; 4] {
    // SAFETY: reads exactly the 64 high-bit bytes of group pair `g / 2`; unaligned is allowed.
    let h = unsafe { _mm512_loadu_si512(x.high[g / 2].as_ptr().cast()) };
    // Bit `4e + k` of each byte moved to bit 2 (16-bit shifts of at most 5: the neighbouring
    // byte's bits land outside bit 2), then `code | (h & 4)`.
    let high = if g.is_multiple_of(2) {
        [
            _mm512_slli_epi16::<2>(h),
            _mm512_slli_epi16::<1>(h),
            h,
            _mm512_srli_epi16::<1>(h),
        ]
    } else {
        [
            _mm512_srli_epi16::<2>(h),
            _mm512_srli_epi16::<3>(h),
            _mm512_srli_epi16::<4>(h),
            _mm512_srli_epi16::<5>(h),
        ]
    };
    or_masked_each(group_codes(&x.low[g]), high, _mm512_set1_epi8(4))
}

super_block_adder!(fn add_block(d, x: &BlockQ3Kx16, tokens, acc) {
    let mut sumi = [_mm512_setzero_si512(); N];
    for p in 0..GROUPS / 2 {
        prefetch_part_ahead(x, p, GROUPS / 2);
        let codes = [codes(x, 2 * p), codes(x, 2 * p + 1)];
        let sc = [0, 1].map(|e| {
            // SAFETY: reads exactly the 16 scale bytes of group `2p + e`; unaligned is
            // allowed.
            let bytes = unsafe { _mm_loadu_si128(x.sc[2 * p + e].as_ptr().cast()) };
            _mm512_cvtepi8_epi32(bytes)
        });
        let offsets = negated_scale_pairs(sc[0], sc[1], BlockQ3Kx16::OFFSET);
        let sc = sc.map(|sc| d.lane_scales(sc));
        for (t, sumi) in sumi.iter_mut().enumerate() {
            let y = tokens.block(t);
            for e in 0..2 {
                let g = 2 * p + e;
                let q = &y.qs[16 * g..16 * g + 16];
                *sumi = _mm512_add_epi32(*sumi, scaled_group_dot(d, 7, &codes[e], q, sc[e]));
            }
            let sums = word_pair(y.bsums[2 * p], y.bsums[2 * p + 1]);
            *sumi = d.dpwssd(*sumi, offsets, sums);
        }
    }
    add_scaled(acc, &x.d, &sumi, tokens, Sign::Plus);
});
