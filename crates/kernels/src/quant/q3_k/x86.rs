//! AVX2 Q3_K × Q8_K dot product (ggml's algorithm: the two low bits and the "minus 4" of a
//! clear high bit multiplied separately with `maddubs` and subtracted, one i16 scale multiply
//! per group of 16).

use std::arch::x86_64::*;

use super::BlockQ3K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{
    f16_broadcast_8, hsum_float_8, load_i8x32, load_u8x32, prefetch_ahead, scale_pair,
    two_bit_codes_32,
};

/// AVX2 version of [`BlockQ3K`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(4);
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let scales = x.group_scales();
        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let hbits = load_u8x32(&x.hmask);
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            for (j, low) in two_bit_codes_32(&qx[n]).into_iter().enumerate() {
                // 4 where the high bit (bit `4n + j` of each hmask byte) is clear, else 0.
                let bit = _mm256_set1_epi8(1 << (4 * n + j));
                let clear = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit), _mm256_setzero_si256());
                let sub = _mm256_and_si256(clear, m4);
                let q8 = load_i8x32(&qy[4 * n + j]);
                let p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(low, q8), _mm256_maddubs_epi16(sub, q8));
                let g = 8 * n + 2 * j;
                let scale = scale_pair(scales[g] as i16, scales[g + 1] as i16);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale, p));
            }
        }
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d), f16_broadcast_8(x.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
