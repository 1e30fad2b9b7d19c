//! AVX2 IQ4_XS × Q8_K dot product (ggml's algorithm: table lookups with `pshufb`, signed byte
//! products, one i16 scale multiply per sub-block).

use std::arch::x86_64::*;

use super::BlockIq4Xs;
use crate::quant::iq4_codes::KVALUES;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{
    f16_broadcast_8, hsum_float_8, load_i8x32, lookup_nibbles_32, mul_add_i8_pairs, prefetch_ahead,
};

/// AVX2 version of [`BlockIq4Xs`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq4Xs], a: &[BlockQ8K]) -> f32 {
    // SAFETY: reads exactly the 16 bytes of the table; unaligned loads are allowed.
    let table = unsafe { _mm_loadu_si128(KVALUES.as_ptr().cast()) };
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (qx, _) = x.qs.as_chunks::<16>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = [_mm256_setzero_si256(); 2];
        for j in 0..8 {
            let p = mul_add_i8_pairs(lookup_nibbles_32(table, &qx[j]), load_i8x32(&qy[j]));
            let scale = _mm256_set1_epi16(x.scale(j) as i16);
            sumi[j % 2] = _mm256_add_epi32(sumi[j % 2], _mm256_madd_epi16(scale, p));
        }
        let d = _mm256_mul_ps(f16_broadcast_8(x.d), _mm256_set1_ps(y.d));
        let sumi = _mm256_add_epi32(sumi[0], sumi[1]);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
