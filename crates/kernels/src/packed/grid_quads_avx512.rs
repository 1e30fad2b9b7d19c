//! AVX-512 kernel of the `grid_quads` layout (IQ3_XXS, IQ3_S): per group of four values one
//! gather fetches the grid words of all sixteen rows (row `i` in 32-bit lane `i`); the group's
//! sign mask turns each magnitude `g` into the byte code `64 + g` or `64 − g` (magnitudes are
//! below 64), and one `vpdpbusd` per token dots those codes with the token's four activations
//! broadcast from memory. Per sub-block `64·Σa` (from the summaries) is subtracted, which leaves
//! the exact `Σ ±g·a`, and the rows' multipliers `2l + 1` scale it; the float steps are the
//! reference's (`grid_quads`).
//!
//! Per group and sixteen rows: the index load, the gather, the sign mask load and two byte
//! operations, then one multiply-add per token (IQ3_S adds a mask load and an `or` for the
//! ninth index bit).

use std::arch::x86_64::*;

use super::ROWS;
use super::byte_dot::{ByteDot, broadcast_quad};
use super::fold_avx512::{Tokens, row_scales};
use super::grid_quads::{GridQuadRows, SUB_BLOCKS};
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

/// How far the byte codes lie above the signed values: `OFFSET · Σa` is subtracted.
const OFFSET: i32 = 64;

/// Groups of a sub-block.
const GROUPS_PER_SUB_BLOCK: usize = 8;

/// The byte codes `64 ± g` of group `q` of sixteen rows: row `i`'s four in 32-bit lane `i`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn group_codes<B: GridQuadRows>(x: &B, q: usize) -> __m512i {
    let quads = x.quads();
    // SAFETY: reads exactly the 16 index bytes of group `q`; unaligned is allowed.
    let low = unsafe { _mm_loadu_si128(quads.qs[q].as_ptr().cast()) };
    let mut index = _mm512_cvtepu8_epi32(low);
    let grid = B::grid();
    assert!(grid.len() >= 256);
    if let Some(high) = x.high() {
        assert!(grid.len() >= 512);
        index = _mm512_mask_or_epi32(index, high[q], index, _mm512_set1_epi32(256));
    }
    // SAFETY: every index is below the grid's length (asserted above): eight bits, plus a
    // ninth (256) only where the grid has 512 words.
    let magnitudes = unsafe { _mm512_i32gather_epi32::<4>(index, grid.as_ptr().cast()) };
    let offset = _mm512_set1_epi8(OFFSET as i8);
    let positive = _mm512_or_si512(magnitudes, offset);
    _mm512_mask_sub_epi8(positive, quads.signs[q], offset, magnitudes)
}

/// The sixteen rows' multipliers `2l + 1` of sub-block `j`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn multipliers(levels: &[[u8; ROWS]; SUB_BLOCKS / 2], j: usize) -> __m512i {
    // SAFETY: reads exactly the 16 level bytes of sub-blocks `j` and `j ^ 1`; unaligned is
    // allowed.
    let bytes = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(levels[j / 2].as_ptr().cast()) });
    let bytes = match j % 2 {
        0 => bytes,
        _ => _mm512_srli_epi32::<4>(bytes),
    };
    let level = _mm512_and_si512(bytes, _mm512_set1_epi32(0xF));
    _mm512_add_epi32(_mm512_add_epi32(level, level), _mm512_set1_epi32(1))
}

/// Adds super-block `x`'s products with the tokens' activations to their accumulators.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn add_block<B: GridQuadRows, D: ByteDot, const N: usize>(
    d: D,
    x: &B,
    tokens: Tokens<'_>,
    acc: &mut [__m512; N],
) {
    prefetch_ahead(x);
    let ys: [&BlockQ8K; N] = std::array::from_fn(|t| tokens.block(t));
    let sums: [&[BlockSummary]; N] = std::array::from_fn(|t| tokens.summaries(t));
    let mut sum = [_mm512_setzero_si512(); N];
    for j in 0..SUB_BLOCKS {
        // Two chains of multiply-adds per token, so that neither waits on the other.
        let mut dots = [[_mm512_setzero_si512(); 2]; N];
        for k in 0..GROUPS_PER_SUB_BLOCK {
            let q = GROUPS_PER_SUB_BLOCK * j + k;
            let codes = group_codes(x, q);
            for (dots, y) in dots.iter_mut().zip(&ys) {
                dots[k % 2] = d.dpbusd_7bit(dots[k % 2], codes, broadcast_quad(&y.qs, q));
            }
        }
        let m = multipliers(&x.quads().levels, j);
        for ((sum, [even, odd]), sums) in sum.iter_mut().zip(dots).zip(&sums) {
            let offset = _mm512_set1_epi32(OFFSET * sums[j].sum);
            let dot = _mm512_sub_epi32(_mm512_add_epi32(even, odd), offset);
            *sum = _mm512_add_epi32(*sum, _mm512_mullo_epi32(dot, m));
        }
    }
    let dw = row_scales(&x.quads().d);
    for ((acc, sum), y) in acc.iter_mut().zip(sum).zip(&ys) {
        let d = _mm512_mul_ps(dw, _mm512_set1_ps(y.d));
        *acc = _mm512_add_ps(*acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)));
    }
}
