//! AVX2 Q5_1 × Q8_1 dot product (ggml's algorithm: the fifth bits spread to bytes and or-ed in,
//! the min term from the activation block sums `s`).

use std::arch::x86_64::*;

use super::BlockQ5_1;
use crate::quant::q4_1::x86::min_block_dot;
use crate::quant::q8_1::BlockQ8_1;
use crate::quant::x86::{bytes_from_bits_32, bytes_from_nibbles_32};

/// AVX2 version of [`BlockQ5_1`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let codes = |x: &BlockQ5_1| {
        let hi = bytes_from_bits_32(u32::from_le_bytes(x.qh));
        let hi = _mm256_and_si256(hi, _mm256_set1_epi8(0x10));
        _mm256_or_si256(bytes_from_nibbles_32(&x.qs), hi)
    };
    min_block_dot(w, a, |x| (x.d, x.m), codes)
}
