//! AVX2 IQ1_S × Q8_K dot product: the four grid words of a sub-block in one register, whose
//! −1/0/1 bytes multiply the activations by `vpsignb`, summed in pairs and scaled by one i16
//! multiply per sub-block; the shift part comes from the activations' sums. Exact integer sums
//! and the reference's float steps, so bit-identical to it.

use std::arch::x86_64::*;

use super::{BlockIq1S, DELTA};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{grid_dot, signed_grid_product, u64x4};

/// AVX2 version of [`BlockIq1S`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq1S], a: &[BlockQ8K]) -> f32 {
    let ones = _mm256_set1_epi8(1);
    let sub_block = |x: &BlockIq1S, ib: usize, q8| {
        let g = u64x4([0, 1, 2, 3].map(|l| x.entry(ib, l)));
        signed_grid_product(ones, q8, g, _mm256_set1_epi16(x.scale(ib) as i16))
    };
    let super_block = |x: &BlockIq1S, y: &BlockQ8K, sumi: i32| {
        x.d.to_f32() * y.d * (sumi as f32 + DELTA * x.shift_sum(y) as f32)
    };
    grid_dot(w, a, sub_block, super_block)
}
