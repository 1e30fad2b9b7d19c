//! AVX2 Q4_0 × Q8_0 dot product.

use std::arch::x86_64::*;

use super::BlockQ4_0;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::x86::{
    bytes_from_nibbles_32, f16_product_8, hsum_float_8, load_i8x32, mul_sum_i8_pairs_float,
    prefetch_ahead,
};

/// AVX2 version of [`BlockQ4_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let d = f16_product_8(x.d, y.d);
        let qx = _mm256_sub_epi8(bytes_from_nibbles_32(&x.qs), _mm256_set1_epi8(8));
        let q = mul_sum_i8_pairs_float(qx, load_i8x32(&y.qs));
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc)
}
