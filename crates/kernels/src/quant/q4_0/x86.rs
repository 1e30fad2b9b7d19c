//! AVX2 Q4_0 × Q8_0 dot product.

use std::arch::x86_64::*;

use super::BlockQ4_0;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_0::x86::dot_with_q8_0;
use crate::quant::x86::{bytes_from_nibbles_32, f16_product_8};

/// AVX2 version of [`BlockQ4_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let scale = |x: &BlockQ4_0, y: &BlockQ8_0| f16_product_8(x.d, y.d);
    let codes = |x: &BlockQ4_0| _mm256_sub_epi8(bytes_from_nibbles_32(&x.qs), _mm256_set1_epi8(8));
    dot_with_q8_0(w, a, scale, codes)
}
