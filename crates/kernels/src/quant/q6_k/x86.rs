//! AVX2 Q6_K × Q8_K dot product (ggml's algorithm: codes biased by +32 through `maddubs`,
//! the bias removed with a second `maddubs` against 32).

use std::arch::x86_64::*;

use super::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{f16_to_f32, hsum_float_8, load_i8x32, load_u8x32};

/// AVX2 version of [`BlockQ6K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let m2 = _mm256_set1_epi8(3);
    let m32s = _mm256_set1_epi8(32);
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let (ql, _) = x.ql.as_chunks::<32>();
        let (qh, _) = x.qh.as_chunks::<32>();
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let bits1 = load_u8x32(&ql[2 * n]);
            let bits2 = load_u8x32(&ql[2 * n + 1]);
            let bits_h = load_u8x32(&qh[n]);
            let high = |shift: i32| {
                let h = match shift {
                    0 => bits_h,
                    2 => _mm256_srli_epi16::<2>(bits_h),
                    4 => _mm256_srli_epi16::<4>(bits_h),
                    _ => _mm256_srli_epi16::<6>(bits_h),
                };
                _mm256_slli_epi16::<4>(_mm256_and_si256(h, m2))
            };
            let q = [
                _mm256_or_si256(_mm256_and_si256(bits1, m4), high(0)),
                _mm256_or_si256(_mm256_and_si256(bits2, m4), high(2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(bits1), m4), high(4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(bits2), m4), high(6)),
            ];
            for (k, q) in q.into_iter().enumerate() {
                let q8k = load_i8x32(&q8[4 * n + k]);
                let p = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q, q8k),
                    _mm256_maddubs_epi16(m32s, q8k),
                );
                let g = 8 * n + 2 * k;
                let scale = _mm256_set_m128i(
                    _mm_set1_epi16(x.scales[g + 1] as i16),
                    _mm_set1_epi16(x.scales[g] as i16),
                );
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale, p));
            }
        }
        let d = _mm256_set1_ps(y.d * f16_to_f32(x.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
