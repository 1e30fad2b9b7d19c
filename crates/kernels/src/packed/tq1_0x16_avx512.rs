//! AVX-512 kernel of [`BlockTq1_0x16`]: each chunk's 64 bytes are loaded once and their
//! trits taken one after the other, `r ← 3r mod 256` in bytes (two adds) and the trit
//! `⌊3r / 256⌋` as two unsigned compares (`r ≥ 86`, `r ≥ 171`) counted into bytes by masked
//! moves, no widening or multiplies; each vector of trits is dotted with every token of the call,
//! sixteen rows per instruction, into four accumulators per token. The activations' sum is
//! subtracted once per super-block.

use std::arch::x86_64::*;

use super::byte_dot::broadcast_quad;
use super::tq1_0x16::{BlockTq1_0x16, CHUNKS, first_value, trits_in};
use super::tq2_0x16_avx512::add_super_block;
use crate::quant::x86::prefetch_ahead;

super_block_dot_group!(BlockTq1_0x16, add_block);

super_block_adder!(fn add_block(d, x: &BlockTq1_0x16, tokens, acc) {
    let (one, third, two_thirds) = (
        _mm512_set1_epi8(1),
        _mm512_set1_epi8(86u8 as i8),
        _mm512_set1_epi8(171u8 as i8),
    );
    prefetch_ahead(x);
    let mut sumi = [[_mm512_setzero_si512(); 4]; N];
    for c in 0..CHUNKS {
        // SAFETY: reads exactly the 64 bytes of chunk `c`; unaligned is allowed.
        let mut r = unsafe { _mm512_loadu_si512(x.qs[c].as_ptr().cast()) };
        for n in 0..trits_in(c) {
            if n > 0 {
                r = _mm512_add_epi8(r, _mm512_add_epi8(r, r));
            }
            let trits = _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(r, third), one);
            let high = _mm512_cmpge_epu8_mask(r, two_thirds);
            let trits = _mm512_mask_add_epi8(trits, high, trits, one);
            let v = first_value(c, n);
            for (t, sumi) in sumi.iter_mut().enumerate() {
                let q = broadcast_quad(&tokens.block(t).qs, v / 4);
                sumi[n % 4] = d.dpbusd_7bit(sumi[n % 4], trits, q);
            }
        }
    }
    add_super_block(acc, &sumi, &x.d, |t| tokens.block(t));
});
