//! The loop every packed AVX-512 kernel runs for a fixed number of tokens `N`, written once:
//! the weight blocks of one row group in order, each adding its products to the `N` tokens'
//! float accumulators (sixteen rows in one vector per token), which end in the outputs.
//!
//! A kernel supplies only what one block adds ([`fold_blocks`]' closure), seeing the tokens'
//! activation blocks and summaries for that block through [`BlockTokens`]. The float steps
//! most super-block kernels end a block with, `acc + (d_w·d_a)·S` and `acc − (dmin_w·d_a)·M`
//! as fused multiply-adds, are [`add_scaled`].

use std::arch::x86_64::*;

use super::ROWS;
use crate::operands::BlockSummary;
use crate::quant::BlockFormat;
use crate::quant::q8_k::BlockQ8K;

/// [`BlockTokens`] of Q8_K activations, those of the super-block kernels.
pub(super) type Tokens<'a> = BlockTokens<'a, BlockQ8K>;

/// The activations of a kernel's `N` tokens at one weight block: each token's activation
/// block and the summaries of its 32-value groups.
#[derive(Clone, Copy)]
pub(super) struct BlockTokens<'a, A> {
    a: &'a [A],
    s: &'a [BlockSummary],
    blocks: usize,
    at: usize,
}

impl<'a, A: BlockFormat> BlockTokens<'a, A> {
    /// Token `t`'s activation block.
    #[inline(always)]
    pub(super) fn block(&self, t: usize) -> &'a A {
        &self.a[t * self.blocks + self.at]
    }

    /// The summaries of token `t`'s 32-value groups of the block.
    #[inline(always)]
    pub(super) fn summaries(&self, t: usize) -> &'a [BlockSummary] {
        let at = (t * self.blocks + self.at) * (A::ELEMS / 32);
        &self.s[at..at + A::ELEMS / 32]
    }
}

/// The call's tokens `size` at a time: each chunk's outputs, with the activation blocks and
/// group summaries from its first token on (`blocks` activation blocks per token).
pub(super) fn token_chunks<'a, A: BlockFormat>(
    out: &'a mut [[f32; ROWS]],
    a: &'a [A],
    s: &'a [BlockSummary],
    blocks: usize,
    size: usize,
) -> impl Iterator<Item = (&'a mut [[f32; ROWS]], &'a [A], &'a [BlockSummary])> {
    out.chunks_mut(size).enumerate().map(move |(c, out)| {
        let first = c * size * blocks;
        (out, &a[first..], &s[first * (A::ELEMS / 32)..])
    })
}

/// The products of the weight blocks `w` (one row group, in order) with `N` tokens, whose
/// activation blocks `a` (and group summaries `s`) follow one another token by token:
/// `add(x, tokens, acc)` adds block `x`'s products to the tokens' accumulators. Returns the
/// accumulators, for [`store`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn fold_blocks<W, A, const N: usize>(
    w: &[W],
    a: &[A],
    s: &[BlockSummary],
    mut add: impl FnMut(&W, BlockTokens<'_, A>, &mut [__m512; N]),
) -> [__m512; N] {
    let blocks = w.len();
    let mut acc = [_mm512_setzero_ps(); N];
    for (at, x) in w.iter().enumerate() {
        add(x, BlockTokens { a, s, blocks, at }, &mut acc);
    }
    acc
}

/// Stores each token's sixteen row sums.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn store<const N: usize>(out: &mut [[f32; ROWS]], acc: [__m512; N]) {
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: writes exactly the 16 floats of `o`; unaligned is allowed.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// The sixteen rows' f16 scales `d` as floats.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn row_scales(d: &[u16; ROWS]) -> __m512 {
    // SAFETY: reads exactly the 32 bytes of the f16 scales; unaligned is allowed.
    _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(d.as_ptr().cast()) })
}

/// Which way [`add_scaled`] takes its products: a scale's are added, a min's subtracted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Sign {
    /// `acc + product`.
    Plus,
    /// `acc − product`.
    Minus,
}

/// `acc_t ± (d_w·d_a)·S_t` for each token `t` (one fused multiply-add), from the rows' f16
/// scales (or mins) `d` and the tokens' exact integer sums `sums`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn add_scaled<const N: usize>(
    acc: &mut [__m512; N],
    d: &[u16; ROWS],
    sums: &[__m512i; N],
    tokens: Tokens<'_>,
    sign: Sign,
) {
    let dw = row_scales(d);
    for (t, (acc, sum)) in acc.iter_mut().zip(sums).enumerate() {
        *acc = scaled(*acc, dw, tokens.block(t).d, *sum, sign);
    }
}

/// [`add_scaled`] for one token: `acc ± (d_w·d_a)·S`, with the rows' scales `dw` as floats
/// ([`row_scales`]) and the token's `d_a`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn scaled(acc: __m512, dw: __m512, d_a: f32, sum: __m512i, sign: Sign) -> __m512 {
    let scale = _mm512_mul_ps(dw, _mm512_set1_ps(d_a));
    let sum = _mm512_cvtepi32_ps(sum);
    match sign {
        Sign::Plus => _mm512_fmadd_ps(scale, sum, acc),
        Sign::Minus => _mm512_fnmadd_ps(scale, sum, acc),
    }
}
