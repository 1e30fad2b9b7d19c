//! AVX2 Q5_0 × Q8_0 dot product.

use std::arch::x86_64::*;

use super::BlockQ5_0;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::q8_0::x86::dot_with_q8_0;
use crate::quant::x86::{
    bytes_from_bits_32, bytes_from_nibbles_32, f16_product_8, hsum_float_8, load_i8x32,
    mul_sum_i8_pairs_float, prefetch_ahead,
};

/// AVX2 version of [`BlockQ5_0`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let scale = |x: &BlockQ5_0, y: &BlockQ8_0| f16_product_8(x.d, y.d);
    dot_with_q8_0(w, a, scale, |x| signed_codes(x))
}

/// The 32 codes of `x` minus 16, as signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn signed_codes(x: &BlockQ5_0) -> __m256i {
    let lo = bytes_from_nibbles_32(&x.qs);
    // A clear fifth bit means q - 16 is negative: set the high nibble to make it so.
    let hi = bytes_from_bits_32(u32::from_le_bytes(x.qh));
    let hi = _mm256_andnot_si256(hi, _mm256_set1_epi8(0xF0u8 as i8));
    _mm256_or_si256(lo, hi)
}

/// [`vec_dot`] of one weight row against `out.len()` activation rows (stored one after the
/// other in `a`), decoding each weight block once for all of them. Every output goes through
/// exactly the operations [`vec_dot`] performs, so it is bit-identical to it.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot_tile(w: &[BlockQ5_0], a: &[BlockQ8_0], out: &mut [f32]) {
    let nb = w.len();
    let mut acc = [_mm256_setzero_ps(); TILE];
    let acc = &mut acc[..out.len()];
    for (i, x) in w.iter().enumerate() {
        prefetch_ahead(x);
        let qx = signed_codes(x);
        for (t, acc) in acc.iter_mut().enumerate() {
            let y = &a[t * nb + i];
            let d = f16_product_8(x.d, y.d);
            let q = mul_sum_i8_pairs_float(qx, load_i8x32(&y.qs));
            *acc = _mm256_fmadd_ps(d, q, *acc);
        }
    }
    for (o, acc) in out.iter_mut().zip(acc.iter()) {
        *o = hsum_float_8(*acc);
    }
}

/// The most activation rows [`vec_dot_tile`] takes at once.
const TILE: usize = crate::operands::TOKEN_TILE;
