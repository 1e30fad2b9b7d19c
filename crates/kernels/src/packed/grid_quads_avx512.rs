//! AVX-512 kernel of the `grid_quads` layout (IQ3_XXS, IQ3_S): the grid (256 or 512 entries)
//! is held in registers three bits a coordinate (`register_grid_avx512`); per two groups of
//! four values one lookup finds the entries of all sixteen rows, and a shift, a mask and a byte
//! shuffle make their magnitudes (row `i` in 32-bit lane `i`). The group's sign mask turns each
//! magnitude `g` into the byte code `64 + g` or `64 − g` (magnitudes are below 64), and one
//! `vpdpbusd` per token dots those codes with the token's four activations broadcast from
//! memory. Per sub-block `64·Σa` (from the summaries) is subtracted, which leaves the exact
//! `Σ ±g·a`, and the rows' multipliers `2l + 1` scale it; the float steps are the reference's
//! (`grid_quads`).
//!
//! The lookup replaced a `vpgatherdd` of the sixteen grid words: on the AMD kind the product
//! of a matrix with one token went 2.3× (IQ3_XXS) and 1.6× (IQ3_S) faster, and looking up two
//! groups at once instead of one then 1.20× and 1.58× (matrix products of 16–512 tokens
//! 1.44× and 1.41×). Tried and not kept: one word permute putting each entry in both words
//! of its lane, with the sign chosen inside the byte shuffle (IQ3_XXS 1.03×, IQ3_S 0.94×).

use std::arch::x86_64::*;

use super::ROWS;
use super::byte_dot::broadcast_quad;
use super::fold_avx512::row_scales;
use super::grid_quads::{GridQuadRows, SUB_BLOCKS};
use super::register_grid_avx512::{MAX_ENTRIES, RegisterGrid};
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::prefetch_ahead;

/// How far the byte codes lie above the signed values: `OFFSET · Σa` is subtracted.
const OFFSET: i32 = 64;

/// Groups of a sub-block.
const GROUPS_PER_SUB_BLOCK: usize = 8;

/// `packed` (coordinate `c` at bits `3c`) rearranged for [`group_codes`]: coordinates 0 and
/// 2 at bits 0 and 3, 1 and 3 at bits 8 and 11, so that in each 32-bit lane holding the entry
/// in both words, word `w` shifted right by `3w` holds coordinates `2w` and `2w + 1` in its
/// bytes' three low bits; zero past its entries.
const fn quad_shift_codes(packed: &[u16]) -> [u16; MAX_ENTRIES] {
    let mut out = [0u16; MAX_ENTRIES];
    let mut i = 0;
    while i < packed.len() {
        let e = packed[i];
        out[i] = (e & 7) | (e >> 6 & 7) << 3 | (e >> 3 & 7) << 8 | (e >> 9 & 7) << 11;
        i += 1;
    }
    out
}

/// The byte codes `64 ± g` of groups `q` and `q + 1` (`q` even) of sixteen rows, group
/// `q + h` in vector `h`, row `i`'s four in its 32-bit lane `i`: one lookup finds the two
/// groups' 32 entries.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn group_codes<B: GridQuadRows>(grid: &RegisterGrid, x: &B, q: usize) -> [__m512i; 2] {
    let quads = x.quads();
    let pair = &quads.qs[q..q + 2];
    // SAFETY: reads exactly the 32 index bytes of the two groups, which lie side by side;
    // unaligned is allowed.
    let low = unsafe { _mm256_loadu_si256(pair.as_ptr().cast()) };
    let mut index = _mm512_cvtepu8_epi16(low);
    if let Some(high) = x.high() {
        let ninth = u32::from(high[q]) | u32::from(high[q + 1]) << 16;
        let ninth = _mm512_maskz_mov_epi16(ninth, _mm512_set1_epi16(256));
        index = _mm512_or_si512(index, ninth);
    }
    let found = grid.lookup(index);
    let halves = [
        _mm512_castsi512_si256(found),
        _mm512_extracti64x4_epi64::<1>(found),
    ];
    let values = _mm512_set1_epi64(i64::from_le_bytes(B::VALUES));
    let offset = _mm512_set1_epi8(OFFSET as i8);
    [0, 1].map(|h| {
        let entries = _mm512_cvtepu16_epi32(halves[h]);
        let both = _mm512_or_si512(entries, _mm512_slli_epi32::<16>(entries));
        let shifted = _mm512_srlv_epi16(both, _mm512_set1_epi32(0x0003_0000));
        let coordinates = _mm512_and_si512(shifted, _mm512_set1_epi16(0x0707));
        let magnitudes = _mm512_shuffle_epi8(values, coordinates);
        let positive = _mm512_or_si512(magnitudes, offset);
        _mm512_mask_sub_epi8(positive, quads.signs[q + h], offset, magnitudes)
    })
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

super_block_adder!(pub(super) fn add_block<B: GridQuadRows>(d, x: &B, tokens, acc) {
    let codes: &[u16; MAX_ENTRIES] = const { &quad_shift_codes(B::PACKED_GRID) };
    let grid = RegisterGrid::new(codes, B::PACKED_GRID.len());
    prefetch_ahead(x);
    let ys: [&BlockQ8K; N] = std::array::from_fn(|t| tokens.block(t));
    let sums: [&[BlockSummary]; N] = std::array::from_fn(|t| tokens.summaries(t));
    let mut sum = [_mm512_setzero_si512(); N];
    for j in 0..SUB_BLOCKS {
        // Two chains of multiply-adds per token, so that neither waits on the other.
        let mut dots = [[_mm512_setzero_si512(); 2]; N];
        for q in (GROUPS_PER_SUB_BLOCK * j..GROUPS_PER_SUB_BLOCK * (j + 1)).step_by(2) {
            let codes = group_codes(&grid, x, q);
            for (dots, y) in dots.iter_mut().zip(&ys) {
                for (h, codes) in codes.into_iter().enumerate() {
                    dots[h] = d.dpbusd_7bit(dots[h], codes, broadcast_quad(&y.qs, q + h));
                }
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
});
