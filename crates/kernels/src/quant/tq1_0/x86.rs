//! AVX2 TQ1_0 × Q8_K dot product: sixteen bytes at a time, each byte times `3ⁿ` modulo 256 in
//! 16-bit lanes (even and odd bytes apart) and the trit taken as the high half of `3 · q`
//! (`vpmulhuw` by 768); the trits (0, 1, 2) multiply the activations as unsigned bytes and the
//! activations' sum is subtracted once, which is `Σ (trit − 1) · a` exactly. The float step is
//! the reference's, so the result is bit-identical to it.

use std::arch::x86_64::*;

use super::{BlockTq1_0, POW3};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{hsum_i32_4, prefetch_ahead};

/// The trits `n` of 16 bytes, with `pow` holding `3ⁿ` per byte.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn trits(x: __m128i, pow: __m128i) -> __m128i {
    let low = _mm_set1_epi16(0xFF);
    let even = _mm_mullo_epi16(_mm_and_si128(x, low), _mm_and_si128(pow, low));
    let odd = _mm_mullo_epi16(_mm_srli_epi16::<8>(x), _mm_srli_epi16::<8>(pow));
    let third = _mm_set1_epi16(768);
    let even = _mm_mulhi_epu16(_mm_and_si128(even, low), third);
    let odd = _mm_mulhi_epu16(_mm_and_si128(odd, low), third);
    _mm_or_si128(even, _mm_slli_epi16::<8>(odd))
}

/// `Σ t_i · a_i` of 16 trits (unsigned bytes) and 16 activations, as 4 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot16(t: __m128i, a: &[i8]) -> __m128i {
    // SAFETY: `a` holds the 16 bytes read; unaligned loads are allowed.
    let a = unsafe { _mm_loadu_si128(a[..16].as_ptr().cast()) };
    _mm_madd_epi16(_mm_maddubs_epi16(t, a), _mm_set1_epi16(1))
}

/// AVX2 version of [`BlockTq1_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockTq1_0], a: &[BlockQ8K]) -> f32 {
    let pow = POW3.map(|p| _mm_set1_epi8(p as i8));
    // Byte `4n + j` of the `qh` vector is trit `n` of `qh[j]`.
    let pow_qh = _mm_set_epi32(
        27 * 0x0101_0101,
        9 * 0x0101_0101,
        3 * 0x0101_0101,
        0x0101_0101,
    );
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        // SAFETY: each load reads 16 of the 48 bytes of `qs`; unaligned loads are allowed.
        let qs = unsafe {
            [0, 16, 32].map(|at| _mm_loadu_si128(x.qs[at..at + 16].as_ptr().cast::<__m128i>()))
        };
        let mut acc = _mm_setzero_si128();
        for (n, &pow) in pow.iter().enumerate() {
            for (half, &bytes) in qs[..2].iter().enumerate() {
                let at = 32 * n + 16 * half;
                acc = _mm_add_epi32(acc, dot16(trits(bytes, pow), &y.qs[at..]));
            }
            let at = 160 + 16 * n;
            acc = _mm_add_epi32(acc, dot16(trits(qs[2], pow), &y.qs[at..]));
        }
        let qh = _mm_set1_epi32(i32::from_le_bytes(x.qh));
        acc = _mm_add_epi32(acc, dot16(trits(qh, pow_qh), &y.qs[240..]));
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let sum = hsum_i32_4(acc) - a_sum;
        sumf += sum as f32 * (x.d.to_f32() * y.d);
    }
    sumf
}
