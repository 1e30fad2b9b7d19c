//! AVX2 TQ2_0 × Q8_K dot product: the 2-bit codes (0..=3) multiply the activations as unsigned
//! bytes and the activations' sum is subtracted once, which is `Σ (q − 1) · a` exactly; the
//! float step is the reference's, so the result is bit-identical to it.

use std::arch::x86_64::*;

use super::BlockTq2_0;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{hsum_i32_8, load_i8x32, prefetch_ahead, two_bit_codes_32};

/// AVX2 version of [`BlockTq2_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockTq2_0], a: &[BlockQ8K]) -> f32 {
    let ones = _mm256_set1_epi16(1);
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (qs, _) = x.qs.as_chunks::<32>();
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = _mm256_setzero_si256();
        for (half, bits) in qs.iter().enumerate() {
            for (l, codes) in two_bit_codes_32(bits).into_iter().enumerate() {
                let p = _mm256_maddubs_epi16(codes, load_i8x32(&q8[4 * half + l]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
            }
        }
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let sum = hsum_i32_8(acc) - a_sum;
        sumf += sum as f32 * (y.d * x.d.to_f32());
    }
    sumf
}
