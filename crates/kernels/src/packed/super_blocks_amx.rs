//! The AMX kernel of the packed K-quant formats (Q4_K, Q5_K, Q6_K, IQ4_XS), bit-identical to
//! their AVX-512 VNNI kernels: per 32-value sub-block one `tdpbsud` (two for Q6_K, whose
//! 16-value halves have a scale each) gives the exact integer dots of up to sixteen tokens
//! with sixteen rows; the layout adds them into each token's integer super-block sums as its
//! VNNI kernel does ([`TileSubBlocks`]) and ends the super-block with the same float steps. A
//! call with fewer tokens than fill a tile usefully goes to the VNNI kernel.

use std::arch::x86_64::*;

use super::amx::{MAX_TOKENS, TileUnit, by_tile_chunks, dot_codes};
use super::fold_avx512::store;
use super::{Avx512Kernels, ROWS};
use crate::operands::BlockSummary;
use crate::quant::q8_k::BlockQ8K;

/// Sub-blocks of 32 values in a super-block.
const SUB_BLOCKS: usize = 8;

/// A packed super-block layout the tile unit multiplies: what its sub-blocks give the tiles
/// and how the exact dots become its products, as in its VNNI kernel.
pub(super) trait TileSubBlocks: Avx512Kernels<Act = BlockQ8K> {
    /// The unsigned codes of sub-block `j`: vector `g` gives each row (32-bit lane `i`) its
    /// codes `4g..4g + 4`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW, VL and VNNI.
    unsafe fn codes(&self, j: usize) -> [__m512i; 8];

    /// The parts of a sub-block with a scale each: 1, or 2 (its 16-value halves, codes
    /// vectors 0–3 and 4–7).
    const PARTS: usize = 1;

    /// A token's integer super-block sums `sumi` with sub-block `j` added, from the exact dots
    /// `dots` of its parts' codes with the token's activations (row `i` in lane `i`), the
    /// token's activation block `y` and its group summaries of the super-block.
    ///
    /// # Safety
    /// As [`Self::codes`].
    unsafe fn add_sub_block(
        &self,
        j: usize,
        dots: &[__m512i],
        y: &BlockQ8K,
        summaries: &[BlockSummary],
        sumi: __m512i,
    ) -> __m512i;

    /// A token's accumulators `acc` after the super-block, from its integer sums `sumi` and
    /// its activation block `y`.
    ///
    /// # Safety
    /// As [`Self::codes`].
    unsafe fn finish(&self, sumi: __m512i, y: &BlockQ8K, acc: __m512) -> __m512;
}

/// The layout's VNNI kernel on the tile unit `T` (or its model) where a call has tokens
/// enough.
///
/// # Safety
/// The CPU must support AVX-512 VNNI, and what [`TileUnit::configure`] asks of `T`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn dot_group<P: TileSubBlocks, T: TileUnit>(
    w: &[P],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    by_tile_chunks(
        out,
        a,
        s,
        w.len(),
        // SAFETY: this function's target features include AVX-512 VNNI.
        |out, a, s| unsafe { (P::DOT)(w, a, s, out) },
        // SAFETY: the caller checked what `T` needs.
        |out, a, s| unsafe { dot_tile::<P, T>(w, a, s, out) },
    );
}

/// The rows of `w` against each of the `out.len()` (at most [`MAX_TOKENS`]) tokens of `a`.
///
/// # Safety
/// As [`dot_group`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_tile<P: TileSubBlocks, T: TileUnit>(
    w: &[P],
    a: &[BlockQ8K],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    let (nb, tokens) = (w.len(), out.len());
    assert!(tokens <= MAX_TOKENS && a.len() >= tokens * nb);
    assert!(s.len() >= tokens * nb * SUB_BLOCKS);
    // SAFETY: the caller checked what `T` needs.
    let mut tiles = unsafe { T::configure(tokens) };
    let mut acc = [_mm512_setzero_ps(); MAX_TOKENS];
    let mut sums = [[0i32; 16]; MAX_TOKENS];
    let stride = nb * size_of::<BlockQ8K>();
    for (b, x) in w.iter().enumerate() {
        let mut sumi = [_mm512_setzero_si512(); MAX_TOKENS];
        for j in 0..SUB_BLOCKS {
            // SAFETY: this function's target features are what `codes` needs.
            let codes = unsafe { x.codes(j) };
            let mut dots = [[_mm512_setzero_si512(); 2]; MAX_TOKENS];
            for part in 0..P::PARTS {
                // The part's code vectors; the other part's are zero.
                let mut mine = codes;
                for (g, q) in mine.iter_mut().enumerate() {
                    if g * P::PARTS / codes.len() != part {
                        *q = _mm512_setzero_si512();
                    }
                }
                let first = a[b].qs[32 * j..].as_ptr();
                // SAFETY: row `t` is the 32 codes of sub-block `j` of token `t`'s block `b`,
                // `a[t * nb + b]`, `t * stride` bytes after token 0's; it exists for every
                // `t < tokens` (checked above).
                unsafe { dot_codes(&mut tiles, mine, (first, stride), &mut sums) };
                for (dots, sums) in dots.iter_mut().zip(&sums).take(tokens) {
                    // SAFETY: reads exactly the sixteen sums of one token.
                    dots[part] = unsafe { _mm512_loadu_si512(sums.as_ptr().cast()) };
                }
            }
            for (t, (sumi, dots)) in sumi.iter_mut().zip(&dots).enumerate().take(tokens) {
                let (y, at) = (&a[t * nb + b], (t * nb + b) * SUB_BLOCKS);
                let summaries = &s[at..at + SUB_BLOCKS];
                // SAFETY: as for `codes`.
                *sumi = unsafe { x.add_sub_block(j, &dots[..P::PARTS], y, summaries, *sumi) };
            }
        }
        for (t, (acc, sumi)) in acc.iter_mut().zip(sumi).enumerate().take(tokens) {
            // SAFETY: as for `codes`.
            *acc = unsafe { x.finish(sumi, &a[t * nb + b], *acc) };
        }
    }
    drop(tiles);
    store(out, acc);
}
