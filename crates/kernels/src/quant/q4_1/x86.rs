//! AVX2 Q4_1 × Q8_1 dot product (ggml's algorithm: unsigned codes times signed activations,
//! the min term from the activation block sums `s`).

use std::arch::x86_64::*;

use half::f16;

use super::BlockQ4_1;
use crate::quant::q8_1::BlockQ8_1;
use crate::quant::x86::{
    bytes_from_nibbles_32, f16_product, f16_product_8, hsum_float_8, load_i8x32,
    mul_sum_us8_pairs_float, prefetch_ahead,
};

/// AVX2 version of [`BlockQ4_1`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    min_block_dot(w, a, |x| (x.d, x.m), |x| bytes_from_nibbles_32(&x.qs))
}

/// The frame of the Q4_1 and Q5_1 dot products (ggml's algorithm): per block the 32 unsigned
/// codes `codes(x)` times the signed activations, scaled by `d_w·d_a` into eight float lanes,
/// and the min term `m_w·s_a` (`scales(x)` gives `(d, m)`) summed apart and added at the end.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn min_block_dot<W>(
    w: &[W],
    a: &[BlockQ8_1],
    scales: impl Fn(&W) -> (f16, f16),
    codes: impl Fn(&W) -> __m256i,
) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (d, m) = scales(x);
        summs += f16_product(m, y.s);
        let d = f16_product_8(d, y.d);
        let q = mul_sum_us8_pairs_float(codes(x), load_i8x32(&y.qs));
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc) + summs
}
