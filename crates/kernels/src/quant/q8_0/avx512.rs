//! AVX-512 Q8_0 × Q8_0 dot product: two blocks per register, signed products through VNNI's
//! unsigned-by-signed `vpdpbusd` (weights made absolute, their signs moved to the activations).

use std::arch::x86_64::*;

use super::BlockQ8_0;
use crate::quant::avx512::{f16_products_2x8, load_i8x32_pair};
use crate::quant::x86::prefetch_ahead;

/// AVX-512 version of [`BlockQ8_0`]'s `vec_dot`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    let (wp, wt) = w.as_chunks::<2>();
    let (ap, at) = a[..w.len()].as_chunks::<2>();
    let mut acc = _mm512_setzero_ps();
    for (x, y) in wp.iter().zip(ap) {
        prefetch_ahead(x);
        let qx = load_i8x32_pair(&x[0].qs, &x[1].qs);
        let qy = load_i8x32_pair(&y[0].qs, &y[1].qs);
        let negative = _mm512_movepi8_mask(qx);
        let sy = _mm512_mask_sub_epi8(qy, negative, _mm512_setzero_si512(), qy);
        let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(qx), sy);
        let d = f16_products_2x8(x[0].d, y[0].d, x[1].d, y[1].d);
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), acc);
    }
    _mm512_reduce_add_ps(acc) + super::x86::vec_dot(wt, at)
}
