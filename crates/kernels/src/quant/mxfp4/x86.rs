//! AVX2 MXFP4 × Q8_0 dot product (ggml's algorithm: the 16-entry code table looked up with
//! `pshufb`, then signed byte products scaled by the block's power of two).

use std::arch::x86_64::*;

use super::{BlockMxfp4, KVALUES, e8m0_to_f32_half};
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_0::x86::dot_with_q8_0;
use crate::quant::x86::lookup_nibbles_32;

/// AVX2 version of [`BlockMxfp4`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockMxfp4], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: reads exactly the 16 bytes of the table; unaligned loads are allowed.
    let table = unsafe { _mm_loadu_si128(KVALUES.as_ptr().cast()) };
    let scale =
        |x: &BlockMxfp4, y: &BlockQ8_0| _mm256_set1_ps(y.d.to_f32() * e8m0_to_f32_half(x.e));
    dot_with_q8_0(w, a, scale, |x| lookup_nibbles_32(table, &x.qs))
}
