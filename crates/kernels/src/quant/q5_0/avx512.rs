//! AVX-512 Q5_0 × Q8_0 dot product: two blocks per register; the fifth bits become a byte
//! mask, and `|q - 16|` times the activations signed by that mask go through VNNI's `vpdpbusd`.

use std::arch::x86_64::*;

use super::BlockQ5_0;
use crate::quant::avx512::{f16_products_2x8, load_i8x32_pair};
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::x86::prefetch_ahead;

/// AVX-512 version of [`BlockQ5_0`]'s `vec_dot`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let (wp, wt) = w.as_chunks::<2>();
    let (ap, at) = a[..w.len()].as_chunks::<2>();
    let m4 = _mm512_set1_epi8(0xF);
    let sixteen = _mm512_set1_epi8(16);
    let mut acc = _mm512_setzero_ps();
    for (x, y) in wp.iter().zip(ap) {
        prefetch_ahead(x);
        // SAFETY: reads exactly the 16 code bytes of each block; unaligned loads are allowed.
        let packed =
            unsafe { _mm256_loadu2_m128i(x[1].qs.as_ptr().cast(), x[0].qs.as_ptr().cast()) };
        // [x0 codes, x1 codes, x0 codes >> 4, x1 codes >> 4] -> [x0 low, x0 high, x1 low, x1 high]
        let both = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(packed),
            _mm256_srli_epi16::<4>(packed),
        );
        let low4 = _mm512_and_si512(_mm512_shuffle_i64x2::<0b11_01_10_00>(both, both), m4);
        // A clear fifth bit means q - 16 = low4 - 16 is negative: |q - 16| = 16 - low4.
        let high = u32::from_le_bytes(x[0].qh) as u64 | (u32::from_le_bytes(x[1].qh) as u64) << 32;
        let negative: __mmask64 = !high;
        let ax = _mm512_mask_sub_epi8(low4, negative, sixteen, low4);
        let qy = load_i8x32_pair(&y[0].qs, &y[1].qs);
        let sy = _mm512_mask_sub_epi8(qy, negative, _mm512_setzero_si512(), qy);
        let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy);
        let d = f16_products_2x8(x[0].d, y[0].d, x[1].d, y[1].d);
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), acc);
    }
    _mm512_reduce_add_ps(acc) + super::x86::vec_dot(wt, at)
}

/// [`vec_dot`] of one weight row against `out.len()` activation rows (stored one after the
/// other in `a`), decoding each pair of weight blocks once for all of them. Every output goes
/// through exactly the operations [`vec_dot`] performs, so it is bit-identical to it.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot_tile(w: &[BlockQ5_0], a: &[BlockQ8_0], out: &mut [f32]) {
    let nb = w.len();
    let (wp, wt) = w.as_chunks::<2>();
    let m4 = _mm512_set1_epi8(0xF);
    let sixteen = _mm512_set1_epi8(16);
    let mut acc = [_mm512_setzero_ps(); TILE];
    let acc = &mut acc[..out.len()];
    for (i, x) in wp.iter().enumerate() {
        prefetch_ahead(x);
        // SAFETY: reads exactly the 16 code bytes of each block; unaligned loads are allowed.
        let packed =
            unsafe { _mm256_loadu2_m128i(x[1].qs.as_ptr().cast(), x[0].qs.as_ptr().cast()) };
        let both = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(packed),
            _mm256_srli_epi16::<4>(packed),
        );
        let low4 = _mm512_and_si512(_mm512_shuffle_i64x2::<0b11_01_10_00>(both, both), m4);
        let high = u32::from_le_bytes(x[0].qh) as u64 | (u32::from_le_bytes(x[1].qh) as u64) << 32;
        let negative: __mmask64 = !high;
        let ax = _mm512_mask_sub_epi8(low4, negative, sixteen, low4);
        for (t, acc) in acc.iter_mut().enumerate() {
            let y = &a[t * nb + 2 * i..t * nb + 2 * i + 2];
            let qy = load_i8x32_pair(&y[0].qs, &y[1].qs);
            let sy = _mm512_mask_sub_epi8(qy, negative, _mm512_setzero_si512(), qy);
            let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy);
            let d = f16_products_2x8(x[0].d, y[0].d, x[1].d, y[1].d);
            *acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), *acc);
        }
    }
    let tail = 2 * wp.len();
    for (t, (o, acc)) in out.iter_mut().zip(acc.iter()).enumerate() {
        let at = &a[t * nb + tail..(t + 1) * nb];
        *o = _mm512_reduce_add_ps(*acc) + super::x86::vec_dot(wt, at);
    }
}

/// The most activation rows [`vec_dot_tile`] takes at once.
const TILE: usize = crate::matmul::TOKEN_TILE;
