//! AVX-512 kernel of [`BlockIq4Xsx16`]: each sub-block's indices are looked up as byte
//! codes (`vpshufb`, as for IQ4_NL), dotted with every token of the call sixteen rows per
//! instruction, corrected by the activation sums and scaled in integers; and its AMX kernel
//! (`super_blocks_amx`).

use std::arch::x86_64::*;

use super::byte_codes_avx512::max_code;
use super::fold_avx512::{Sign, add_scaled, row_scales, scaled};
use super::iq4_xsx16::BlockIq4Xsx16;
use super::nibbles::BlockIq4Nlx16;
use super::nibbles_avx512::codes;
use super::q4_kx16_avx512::sub_block_dot;
use crate::operands::BlockSummary;
use crate::quant::x86::prefetch_part_ahead;

/// The largest of IQ4_NL's byte codes (its values plus 128).
const MAX_CODE: u8 = max_code(&BlockIq4Nlx16::CODES);

super_block_dot_group!(
    BlockIq4Xsx16,
    add_block,
    amx {
        codes: |x, j| codes(&x.qs[j], &BlockIq4Nlx16::CODES),
        add_sub_block: |_d, x, j, dots, _y, summaries, sumi| {
            add_sub_block_dot(sumi, dots[0], summaries[j].sum, sub_block_scales(x, j))
        },
        finish: |_d, x, sumi, y, acc| scaled(acc, row_scales(&x.d), y.d, sumi, Sign::Plus),
    }
);

/// The rows' signed scales of sub-block `j`, one 32-bit lane each.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn sub_block_scales(x: &BlockIq4Xsx16, j: usize) -> __m512i {
    // SAFETY: reads exactly the 16 scale bytes of sub-block `j`; unaligned is allowed.
    _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(x.sc[j].as_ptr().cast()) })
}

/// `sumi + sc · (dot − OFFSET · Σa)`: a sub-block's exact dots of the byte codes with a
/// token's activations (sum `Σa`) taken back to the signed values and scaled.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn add_sub_block_dot(sumi: __m512i, dot: __m512i, activation_sum: i32, sc: __m512i) -> __m512i {
    let offset = _mm512_set1_epi32(BlockIq4Xsx16::OFFSET * activation_sum);
    _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_sub_epi32(dot, offset), sc))
}

super_block_adder!(fn add_block(d, x: &BlockIq4Xsx16, tokens, acc) {
    let sums: [&[BlockSummary]; N] = std::array::from_fn(|t| tokens.summaries(t));
    let mut sumi = [_mm512_setzero_si512(); N];
    for j in 0..8 {
        prefetch_part_ahead(x, j, 8);
        let codes = codes(&x.qs[j], &BlockIq4Nlx16::CODES);
        let sc = sub_block_scales(x, j);
        for (t, (sumi, sums)) in sumi.iter_mut().zip(&sums).enumerate() {
            let q = &tokens.block(t).qs[32 * j..32 * j + 32];
            let dot = sub_block_dot(d, MAX_CODE, &codes, q);
            *sumi = add_sub_block_dot(*sumi, dot, sums[j].sum, sc);
        }
    }
    add_scaled(acc, &x.d, &sumi, tokens, Sign::Plus);
});
