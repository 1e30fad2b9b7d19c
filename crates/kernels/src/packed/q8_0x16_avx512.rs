//! AVX-512 VNNI kernel of [`BlockQ8_0x16`]: each 64-byte vector of codes is loaded once per block
//! and dotted with every token of the call, sixteen rows per instruction.

use std::arch::x86_64::*;

use super::q5_0x16::{BlockSummary, ROWS};
use super::q8_0x16::BlockQ8_0x16;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::x86::prefetch_ahead;

/// Tokens one pass over the weights takes (their accumulators stay in registers).
const TOKENS: usize = 8;

/// AVX-512 version of [`super::q8_0x16::dot_group`]; bit-identical to it.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn dot_group(
    w: &[BlockQ8_0x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    let nb = w.len();
    for (c, out) in out.chunks_mut(TOKENS).enumerate() {
        let first = c * TOKENS * nb;
        let (a, s) = (&a[first..], &s[first..]);
        match out.len() {
            1 => dot_tokens::<1>(w, a, s, out),
            2 => dot_tokens::<2>(w, a, s, out),
            3 => dot_tokens::<3>(w, a, s, out),
            4 => dot_tokens::<4>(w, a, s, out),
            5 => dot_tokens::<5>(w, a, s, out),
            6 => dot_tokens::<6>(w, a, s, out),
            7 => dot_tokens::<7>(w, a, s, out),
            _ => dot_tokens::<8>(w, a, s, out),
        }
    }
}

/// The eight vectors of codes (plus 128) of one packed block: vector `g` gives each row its
/// codes `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn codes(x: &BlockQ8_0x16) -> [__m512i; 8] {
    // SAFETY: each load reads exactly the 64 bytes of one array of `x`; unaligned is allowed.
    x.qs.map(|q| unsafe { _mm512_loadu_si512(q.as_ptr().cast()) })
}

/// Activation bytes `4g..4g + 4` of `y` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn broadcast_quad(y: &BlockQ8_0, g: usize) -> __m512i {
    let q = &y.qs[4 * g..4 * g + 4];
    _mm512_set1_epi32(i32::from_le_bytes([
        q[0] as u8, q[1] as u8, q[2] as u8, q[3] as u8,
    ]))
}

/// [`dot_group`] for exactly `N` tokens.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn dot_tokens<const N: usize>(
    w: &[BlockQ8_0x16],
    a: &[BlockQ8_0],
    s: &[BlockSummary],
    out: &mut [[f32; ROWS]],
) {
    let nb = w.len();
    let mut acc = [_mm512_setzero_ps(); N];
    for (b, x) in w.iter().enumerate() {
        prefetch_ahead(x);
        let q = codes(x);
        // SAFETY: reads exactly the 32 bytes of `x.d`; unaligned is allowed.
        let dw = _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(x.d.as_ptr().cast()) });
        for (t, acc) in acc.iter_mut().enumerate() {
            let (y, sm) = (&a[t * nb + b], s[t * nb + b]);
            let zero = _mm512_setzero_si512();
            let mut even = _mm512_dpbusd_epi32(zero, q[0], broadcast_quad(y, 0));
            let mut odd = _mm512_dpbusd_epi32(zero, q[1], broadcast_quad(y, 1));
            even = _mm512_dpbusd_epi32(even, q[2], broadcast_quad(y, 2));
            odd = _mm512_dpbusd_epi32(odd, q[3], broadcast_quad(y, 3));
            even = _mm512_dpbusd_epi32(even, q[4], broadcast_quad(y, 4));
            odd = _mm512_dpbusd_epi32(odd, q[5], broadcast_quad(y, 5));
            even = _mm512_dpbusd_epi32(even, q[6], broadcast_quad(y, 6));
            odd = _mm512_dpbusd_epi32(odd, q[7], broadcast_quad(y, 7));
            let isum =
                _mm512_sub_epi32(_mm512_add_epi32(even, odd), _mm512_set1_epi32(128 * sm.sum));
            let d = _mm512_mul_ps(dw, _mm512_set1_ps(sm.d));
            *acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), *acc);
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: writes exactly the 16 floats of `o`; unaligned is allowed.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), acc) };
    }
}
