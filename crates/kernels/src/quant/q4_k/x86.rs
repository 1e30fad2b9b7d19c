//! AVX2 Q4_K × Q8_K dot product (ggml's algorithm: integer sums per sub-block, one float
//! multiply-add per super-block, the min term from the activation block sums).

use std::arch::x86_64::*;

use super::BlockQ4K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::util::scale_min_k4;
use crate::quant::x86::{f16_to_f32, hsum_float_8, load_i8x32, load_u8x32};

/// AVX2 version of [`BlockQ4K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sc = [0i16; 8];
        let mut sum_mins = 0i32;
        for (j, s) in sc.iter_mut().enumerate() {
            let (scale, min) = scale_min_k4(j, &x.scales);
            *s = scale as i16;
            sum_mins += min as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
        }
        acc_m += y.d * f16_to_f32(x.dmin) * sum_mins as f32;

        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = _mm256_setzero_si256();
        for c in 0..4 {
            let bits = load_u8x32(&qx[c]);
            let lo = _mm256_and_si256(bits, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
            let q8l = load_i8x32(&qy[2 * c]);
            let q8h = load_i8x32(&qy[2 * c + 1]);
            let pl = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c]), _mm256_maddubs_epi16(lo, q8l));
            let ph = _mm256_madd_epi16(
                _mm256_set1_epi16(sc[2 * c + 1]),
                _mm256_maddubs_epi16(hi, q8h),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        let d = _mm256_set1_ps(y.d * f16_to_f32(x.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc) - acc_m
}
