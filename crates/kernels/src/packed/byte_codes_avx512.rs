//! The AVX-512 kernel shared by the packed 32-value formats with one scale per row whose
//! codes, decoded to bytes, are `vpdpbusd`'s unsigned operand (Q4_0, IQ4_NL, Q5_0, Q8_0 and
//! MXFP4, and with a min per row Q4_1 and Q5_1): only decoding a block's codes and reading its
//! scales differ between them. Each block
//! is decoded once and dotted with every token of the call, sixteen rows per instruction.

use std::arch::x86_64::*;

use super::ROWS;
use super::byte_dot::ByteDot;
use super::fold_avx512::{self, fold_blocks, store};
use crate::operands::BlockSummary;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::x86::prefetch_ahead;

/// Tokens one pass over the weights takes (their accumulators stay in registers).
const TOKENS: usize = 8;

/// The scales of the sixteen rows of a packed block.
pub(super) enum RowScales<'a> {
    /// f16 bits.
    F16(&'a [u16; ROWS]),
    /// f32 values.
    F32(&'a [f32; ROWS]),
}

/// A packed 32-value block of sixteen rows with one scale per row.
pub(super) trait ByteCodes {
    /// How far the decoded codes lie above the signed values: `OFFSET · Σa` is subtracted.
    const OFFSET: i32;
    /// The largest decoded code (below 128, a cheaper product without VNNI: `byte_dot`).
    const MAX_CODE: u8;
    /// Each row's scale.
    fn scales(&self) -> RowScales<'_>;
    /// Each row's min, for formats whose values are `d·q + m`: `m · d_a · Σa` joins the sum.
    fn mins(&self) -> Option<RowScales<'_>> {
        None
    }
}

/// The largest code of a lookup table (its [`ByteCodes::MAX_CODE`]).
pub(super) const fn max_code(codes: &[u8]) -> u8 {
    let (mut i, mut max) = (0, 0);
    while i < codes.len() {
        if codes[i] > max {
            max = codes[i];
        }
        i += 1;
    }
    max
}

/// Sixteen row scales as f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn scale_vector(scales: RowScales<'_>) -> __m512 {
    match scales {
        RowScales::F16(d) => fold_avx512::row_scales(d),
        // SAFETY: reads exactly the 64 bytes of the scales; unaligned is allowed.
        RowScales::F32(d) => unsafe { _mm512_loadu_ps(d.as_ptr()) },
    }
}

/// The rows of `w` (one row group) against each token of `a`; `codes` decodes a block into
/// eight vectors, vector `g` giving each row its codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn dot_group<B: ByteCodes>(
    d: impl ByteDot,
    w: &[B],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    codes: impl Fn(&B) -> [__m512i; 8] + Copy,
) {
    for (out, a, s) in fold_avx512::token_chunks(out, a, s, w.len(), TOKENS) {
        for_tokens!(out.len(), 8, dot_tokens[B, _](d, w, a, s, out, codes));
    }
}

/// Activation bytes `4g..4g + 4` of `y` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn broadcast_quad(y: &BlockQ8_0, g: usize) -> __m512i {
    let q = &y.qs[4 * g..4 * g + 4];
    _mm512_set1_epi32(i32::from_le_bytes([
        q[0] as u8, q[1] as u8, q[2] as u8, q[3] as u8,
    ]))
}

/// [`dot_group`] for exactly `N` tokens.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn dot_tokens<B: ByteCodes, D: ByteDot, const N: usize>(
    d: D,
    w: &[B],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    codes: impl Fn(&B) -> [__m512i; 8],
) {
    let acc = fold_blocks(w, a, s, |x, tokens, acc: &mut [__m512; N]| {
        prefetch_ahead(x);
        let q = codes(x);
        let dw = scale_vector(x.scales());
        let mins = x.mins().map(|m| scale_vector(m));
        for (t, acc) in acc.iter_mut().enumerate() {
            let (y, sm) = (tokens.block(t), tokens.summaries(t)[0]);
            let quads = std::array::from_fn(|g| broadcast_quad(y, g));
            let dot = match B::MAX_CODE < 128 {
                true => d.dot_7bit(B::MAX_CODE, q, quads),
                false => d.dot(q, quads),
            };
            let offset = _mm512_set1_epi32(B::OFFSET * sm.sum);
            let isum = _mm512_sub_epi32(dot, offset);
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(sm.d));
            *acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(isum), *acc);
            if let Some(mins) = mins {
                *acc = add_mins(mins, sm, *acc);
            }
        }
    });
    store(out, acc);
}

/// `acc + (m · d_a) · Σa` for sixteen rows' mins `m` (one fused multiply-add).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn add_mins(mins: __m512, sm: BlockSummary, acc: __m512) -> __m512 {
    let dm = _mm512_mul_ps(mins, _mm512_set1_ps(sm.d));
    _mm512_fmadd_ps(dm, _mm512_set1_ps(sm.sum as f32), acc)
}
