//! AVX2 IQ1_S × Q8_K dot product: the four grid words of a sub-block in one register, whose
//! −1/0/1 bytes multiply the activations by `vpsignb`, summed in pairs and scaled by one i16
//! multiply per sub-block; the shift part comes from the activations' sums. Exact integer sums
//! and the reference's float steps, so bit-identical to it.

use std::arch::x86_64::*;

use super::{BlockIq1S, DELTA};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{hsum_i32_8, load_i8x32, prefetch_ahead, u64x4};

/// AVX2 version of [`BlockIq1S`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq1S], a: &[BlockQ8K]) -> f32 {
    let ones = _mm256_set1_epi8(1);
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut acc = _mm256_setzero_si256();
        for (ib, q8) in q8.iter().enumerate() {
            let g = u64x4([0, 1, 2, 3].map(|l| x.entry(ib, l)));
            let p = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(load_i8x32(q8), g));
            let ls = _mm256_set1_epi16(x.scale(ib) as i16);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ls));
        }
        let sumi = hsum_i32_8(acc);
        sumf += x.d.to_f32() * y.d * (sumi as f32 + DELTA * x.shift_sum(y) as f32);
    }
    sumf
}
