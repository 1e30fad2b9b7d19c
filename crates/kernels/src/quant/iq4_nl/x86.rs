//! AVX2 IQ4_NL × Q8_0 dot product (ggml's algorithm: the 16-entry table looked up with
//! `pshufb`, then signed byte products).

use std::arch::x86_64::*;

use super::{BlockIq4Nl, KVALUES};
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_0::x86::dot_with_q8_0;
use crate::quant::x86::{f16_product_8, lookup_nibbles_32};

/// AVX2 version of [`BlockIq4Nl`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq4Nl], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: reads exactly the 16 bytes of the table; unaligned loads are allowed.
    let table = unsafe { _mm_loadu_si128(KVALUES.as_ptr().cast()) };
    let scale = |x: &BlockIq4Nl, y: &BlockQ8_0| f16_product_8(x.d, y.d);
    dot_with_q8_0(w, a, scale, |x| lookup_nibbles_32(table, &x.qs))
}
