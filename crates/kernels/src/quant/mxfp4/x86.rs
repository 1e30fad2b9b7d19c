//! AVX2 MXFP4 × Q8_0 dot product (ggml's algorithm: the 16-entry code table looked up with
//! `pshufb`, then signed byte products scaled by the block's power of two).

use std::arch::x86_64::*;

use super::{BlockMxfp4, KVALUES, e8m0_to_f32_half};
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::x86::{
    hsum_float_8, load_i8x32, lookup_nibbles_32, mul_sum_i8_pairs_float, prefetch_ahead,
};

/// AVX2 version of [`BlockMxfp4`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockMxfp4], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: reads exactly the 16 bytes of the table; unaligned loads are allowed.
    let table = unsafe { _mm_loadu_si128(KVALUES.as_ptr().cast()) };
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let d = _mm256_set1_ps(y.d.to_f32() * e8m0_to_f32_half(x.e));
        let q = mul_sum_i8_pairs_float(lookup_nibbles_32(table, &x.qs), load_i8x32(&y.qs));
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc)
}
