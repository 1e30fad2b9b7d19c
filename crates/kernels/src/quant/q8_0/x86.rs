//! AVX2 Q8_0 × Q8_0 dot product, and the loop every 32-value format's AVX2 dot product against
//! Q8_0 runs.

use std::arch::x86_64::*;

use super::BlockQ8_0;
use crate::quant::x86::{
    f16_product_8, hsum_float_8, load_i8x32, mul_sum_i8_pairs_float, prefetch_ahead,
};

/// AVX2 version of [`BlockQ8_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    let scale = |x: &BlockQ8_0, y: &BlockQ8_0| f16_product_8(x.d, y.d);
    dot_with_q8_0(w, a, scale, |x| load_i8x32(&x.qs))
}

/// The AVX2 dot product of a 32-value format against Q8_0 activations: per block pair, the
/// signed codes `codes(x)` times the activation codes, summed in groups of four to eight float
/// lanes, times the scale `scale(x, y)` and added with one fused multiply-add; the lanes summed
/// at the end.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_with_q8_0<W>(
    w: &[W],
    a: &[BlockQ8_0],
    scale: impl Fn(&W, &BlockQ8_0) -> __m256,
    codes: impl Fn(&W) -> __m256i,
) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let d = scale(x, y);
        let q = mul_sum_i8_pairs_float(codes(x), load_i8x32(&y.qs));
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc)
}
