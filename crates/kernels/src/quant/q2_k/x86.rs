//! AVX2 Q2_K × Q8_K dot product (ggml's algorithm: four 2-bit planes per 32 bytes, one i16
//! scale multiply per group of 16, the min term from the activation block sums).

use std::arch::x86_64::*;

use super::BlockQ2K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{
    f16x2_to_f32, hsum_float_8, load_i8x32, prefetch_ahead, scale_pair, two_bit_codes_32,
};

/// AVX2 version of [`BlockQ2K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        // SAFETY: reads exactly the 16 scale bytes and the 32 bytes of the 16 block sums.
        let (scales_mins, bsums) = unsafe {
            (
                _mm_loadu_si128(x.scales.as_ptr().cast()),
                _mm256_loadu_si256(y.bsums.as_ptr().cast()),
            )
        };
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(
            _mm_srli_epi16::<4>(scales_mins),
            _mm_set1_epi8(0xF),
        ));
        let prod = _mm256_madd_epi16(mins, bsums);
        // [y.d * d, y.d * dmin]
        let scales = _mm_mul_ps(_mm_set1_ps(y.d), f16x2_to_f32(x.d, x.dmin));
        let dmin = _mm256_set1_ps(-_mm_cvtss_f32(_mm_movehdup_ps(scales)));
        acc = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(prod), acc);

        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            for (j, q) in two_bit_codes_32(&qx[n]).into_iter().enumerate() {
                let p = _mm256_maddubs_epi16(q, load_i8x32(&qy[4 * n + j]));
                let g = 8 * n + 2 * j;
                let scale = scale_pair((x.scales[g] & 0xF) as i16, (x.scales[g + 1] & 0xF) as i16);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale, p));
            }
        }
        let d = _mm256_broadcastss_ps(scales);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
