//! AVX-512 kernel of [`BlockIq4Xsx16`]: each sub-block's indices are looked up as byte
//! codes (`vpshufb`, as for IQ4_NL), dotted with every token of the call sixteen rows per
//! instruction, corrected by the activation sums and scaled in integers.

use std::arch::x86_64::*;

use super::byte_codes_avx512::max_code;
use super::byte_dot::ByteDot;
use super::fold_avx512::{Sign, Tokens, add_scaled};
use super::iq4_xsx16::BlockIq4Xsx16;
use super::nibbles::BlockIq4Nlx16;
use super::nibbles_avx512::codes;
use super::q4_kx16_avx512::sub_block_dot;
use crate::operands::BlockSummary;
use crate::quant::x86::prefetch_part_ahead;

/// The largest of IQ4_NL's byte codes (its values plus 128).
const MAX_CODE: u8 = max_code(&BlockIq4Nlx16::CODES);

super_block_dot_group!(BlockIq4Xsx16, add_block);

/// Adds super-block `x`'s products with the tokens' activations to their accumulators.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn add_block<D: ByteDot, const N: usize>(
    d: D,
    x: &BlockIq4Xsx16,
    tokens: Tokens<'_>,
    acc: &mut [__m512; N],
) {
    let sums: [&[BlockSummary]; N] = std::array::from_fn(|t| tokens.summaries(t));
    let mut sumi = [_mm512_setzero_si512(); N];
    for j in 0..8 {
        prefetch_part_ahead(x, j, 8);
        let codes = codes(&x.qs[j], &BlockIq4Nlx16::CODES);
        // SAFETY: reads exactly the 16 scale bytes of sub-block `j`; unaligned is allowed.
        let sc = _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(x.sc[j].as_ptr().cast()) });
        for (t, (sumi, sums)) in sumi.iter_mut().zip(&sums).enumerate() {
            let q = &tokens.block(t).qs[32 * j..32 * j + 32];
            let offset = BlockIq4Xsx16::OFFSET * sums[j].sum;
            let isum = _mm512_sub_epi32(
                sub_block_dot(d, MAX_CODE, &codes, q),
                _mm512_set1_epi32(offset),
            );
            *sumi = _mm512_add_epi32(*sumi, _mm512_mullo_epi32(isum, sc));
        }
    }
    add_scaled(acc, &x.d, &sumi, tokens, Sign::Plus);
}
