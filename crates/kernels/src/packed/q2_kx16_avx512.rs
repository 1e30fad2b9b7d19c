//! AVX-512 kernel of [`BlockQ2Kx16`]: each group's codes are decoded once and dotted with
//! every token of the call, sixteen rows per instruction; scales multiply in integers, and the
//! mins meet the activation sums two groups at a time (`vpdpwssd`).

use std::arch::x86_64::*;

use super::byte_dot::word_pair;
use super::fold_avx512::{Sign, add_scaled};
use super::q2_kx16::BlockQ2Kx16;
use super::two_bits::GROUPS;
use super::two_bits_avx512::{group_codes, scaled_group_dot};
use crate::quant::x86::prefetch_part_ahead;

super_block_dot_group!(BlockQ2Kx16, add_block);

super_block_adder!(fn add_block(d, x: &BlockQ2Kx16, tokens, acc) {
    let nibble = _mm512_set1_epi16(0xF);
    let low_half = _mm512_set1_epi32(0xFFFF);
    let (mut sumi, mut summ) = ([_mm512_setzero_si512(); N], [_mm512_setzero_si512(); N]);
    for p in 0..GROUPS / 2 {
        prefetch_part_ahead(x, p, GROUPS / 2);
        // Row `i`'s bytes of groups `2p` and `2p + 1` as the two 16-bit halves of lane `i`.
        // SAFETY: reads exactly the 32 scale bytes of the pair; unaligned is allowed.
        let pair = _mm512_cvtepu8_epi16(unsafe { _mm256_loadu_si256(x.scales[p].as_ptr().cast()) });
        let scales = _mm512_and_si512(pair, nibble);
        let mins = _mm512_srli_epi16::<4>(pair);
        let sc = [
            d.lane_scales(_mm512_and_si512(scales, low_half)),
            d.lane_scales(_mm512_srli_epi32::<16>(scales)),
        ];
        let codes = [group_codes(&x.qs[2 * p]), group_codes(&x.qs[2 * p + 1])];
        for t in 0..N {
            let y = tokens.block(t);
            for e in 0..2 {
                let g = 2 * p + e;
                let q = &y.qs[16 * g..16 * g + 16];
                let dot = scaled_group_dot(d, 3, &codes[e], q, sc[e]);
                sumi[t] = _mm512_add_epi32(sumi[t], dot);
            }
            let sums = word_pair(y.bsums[2 * p], y.bsums[2 * p + 1]);
            summ[t] = d.dpwssd(summ[t], mins, sums);
        }
    }
    add_scaled(acc, &x.d, &sumi, tokens, Sign::Plus);
    add_scaled(acc, &x.dmin, &summ, tokens, Sign::Minus);
});
