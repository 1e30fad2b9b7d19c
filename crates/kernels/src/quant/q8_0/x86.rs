//! AVX2 Q8_0 × Q8_0 dot product.

use super::BlockQ8_0;
use crate::quant::x86::{dot_with_q8_0, f16_product_8, load_i8x32};

/// AVX2 version of [`BlockQ8_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    let scale = |x: &BlockQ8_0, y: &BlockQ8_0| f16_product_8(x.d, y.d);
    dot_with_q8_0(w, a, scale, |x| load_i8x32(&x.qs))
}
