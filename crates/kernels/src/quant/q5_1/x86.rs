//! AVX2 Q5_1 × Q8_1 dot product (ggml's algorithm: the fifth bits spread to bytes and or-ed in,
//! the min term from the activation block sums `s`).

use std::arch::x86_64::*;

use super::BlockQ5_1;
use crate::quant::q8_1::BlockQ8_1;
use crate::quant::x86::{
    bytes_from_bits_32, bytes_from_nibbles_32, f16_product, f16_product_8, hsum_float_8,
    load_i8x32, mul_sum_us8_pairs_float, prefetch_ahead,
};

/// AVX2 version of [`BlockQ5_1`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        summs += f16_product(x.m, y.s);
        let d = f16_product_8(x.d, y.d);
        let hi = bytes_from_bits_32(u32::from_le_bytes(x.qh));
        let hi = _mm256_and_si256(hi, _mm256_set1_epi8(0x10));
        let qx = _mm256_or_si256(bytes_from_nibbles_32(&x.qs), hi);
        let q = mul_sum_us8_pairs_float(qx, load_i8x32(&y.qs));
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc) + summs
}
