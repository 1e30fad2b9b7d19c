//! The AMX kernel of the packed byte-code formats (Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, Q8_0 and MXFP4),
//! bit-identical to their
//! AVX-512 VNNI kernel (`byte_codes_avx512`): one `tdpbsud` gives the exact integer sums of a
//! block for up to sixteen tokens and sixteen rows at once; each sum is then scaled and added
//! exactly as the VNNI kernel does, blocks in order. A call with fewer tokens than fill a tile
//! usefully goes to the VNNI kernel.

use std::arch::x86_64::*;

use super::ROWS;
use super::amx::{MAX_TOKENS, TileUnit, by_tile_chunks, dot_codes};
use super::byte_codes_avx512::{self, ByteCodes};
use super::byte_dot::Vnni;
use super::fold_avx512;
use crate::operands::BlockSummary;
use crate::quant::q8_0::BlockQ8_0;

/// [`byte_codes_avx512::dot_group`] on the tile unit `T` (or its model).
///
/// # Safety
/// The CPU must support AVX-512 VNNI, and what [`TileUnit::configure`] asks of `T`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn dot_group<B: ByteCodes, T: TileUnit>(
    w: &[B],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    codes: impl Fn(&B) -> [__m512i; 8] + Copy,
) {
    by_tile_chunks(
        out,
        a,
        s,
        w.len(),
        |out, a, s| {
            // SAFETY: this function's target features include AVX-512 VNNI.
            let d = unsafe { Vnni::new() };
            byte_codes_avx512::dot_group(d, w, a, s, out, codes)
        },
        // SAFETY: the caller checked what `T` needs.
        |out, a, s| unsafe { dot_tile::<B, T>(w, a, s, out, codes) },
    );
}

/// The rows of `w` against each of the `out.len()` (at most [`MAX_TOKENS`]) tokens of `a`.
///
/// # Safety
/// As [`dot_group`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_tile<B: ByteCodes, T: TileUnit>(
    w: &[B],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
    codes: impl Fn(&B) -> [__m512i; 8],
) {
    let (nb, tokens) = (w.len(), out.len());
    assert!(tokens <= MAX_TOKENS && a.len() >= tokens * nb && s.len() >= tokens * nb);
    // SAFETY: the caller checked what `T` needs.
    let mut tiles = unsafe { T::configure(tokens) };
    let mut acc = [_mm512_setzero_ps(); MAX_TOKENS];
    let mut sums = [[0i32; 16]; MAX_TOKENS];
    let stride = nb * size_of::<BlockQ8_0>();
    for (b, x) in w.iter().enumerate() {
        // SAFETY: row `t` is the 32 codes of token `t`'s block `b`, `a[t * nb + b]`, which
        // exists for every `t < tokens` (checked above).
        unsafe { dot_codes(&mut tiles, codes(x), (a[b].qs.as_ptr(), stride), &mut sums) };
        let dw = byte_codes_avx512::scale_vector(x.scales());
        let mins = x.mins().map(|m| byte_codes_avx512::scale_vector(m));
        for (t, acc) in acc.iter_mut().enumerate().take(tokens) {
            let sm = s[t * nb + b];
            // SAFETY: reads exactly the sixteen sums of token `t`.
            let dot = unsafe { _mm512_loadu_si512(sums[t].as_ptr().cast()) };
            let isum = _mm512_sub_epi32(dot, _mm512_set1_epi32(B::OFFSET * sm.sum));
            let d = _mm512_mul_ps(dw, _mm512_set1_ps(sm.d));
            *acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), *acc);
            if let Some(mins) = mins {
                *acc = byte_codes_avx512::add_mins(mins, sm, *acc);
            }
        }
    }
    drop(tiles);
    fold_avx512::store(out, acc);
}
