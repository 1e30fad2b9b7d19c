//! AVX2 Q6_K × Q8_K dot product: ggml's unpacking of the codes as unsigned `q + 32` for
//! `maddubs`, with the `-32` bias removed once per super-block from the activation block sums
//! (`32 * sum_g scale_g * bsum_g`) instead of with a second `maddubs` per 32 values.

use std::arch::x86_64::*;

use super::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{
    f16_broadcast_8, hsum_float_8, i16_pair_broadcast_control, load_i8x32, load_u8x32,
    prefetch_ahead,
};

/// AVX2 version of [`BlockQ6K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        // SAFETY: reads exactly the 16 group scales and the 32 bytes of the 16 block sums.
        let (scales, bsums) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr().cast())),
                _mm256_loadu_si256(y.bsums.as_ptr().cast()),
            )
        };
        let bias = _mm256_slli_epi32::<5>(_mm256_madd_epi16(scales, bsums));
        let (ql, _) = x.ql.as_chunks::<32>();
        let (qh, _) = x.qh.as_chunks::<32>();
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            // Scales of groups 8n..8n+8 in both 128-bit halves.
            let sc = if n == 0 {
                _mm256_permute2x128_si256::<0x00>(scales, scales)
            } else {
                _mm256_permute2x128_si256::<0x11>(scales, scales)
            };
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
                let p = _mm256_maddubs_epi16(q, load_i8x32(&q8[4 * n + k]));
                let scale = _mm256_shuffle_epi8(sc, i16_pair_broadcast_control(2 * k, 2 * k + 1));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale, p));
            }
        }
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d), f16_broadcast_8(x.d));
        let sumi = _mm256_sub_epi32(sumi, bias);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
