//! AVX2 IQ3_S × Q8_K dot product: the eight grid words of a sub-block in one register, the
//! signs applied to the activations, byte products and one i16 scale multiply per sub-block;
//! exact integer sums and the reference's float steps, so bit-identical to it.

use std::arch::x86_64::*;

use super::BlockIq3S;
use crate::quant::iq_grids::{IQ3S_GRID, SIGN_BYTES};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::signed_grid::SignedGrid;
use crate::quant::x86::{grid_dot, signed_grid_product, u32x8, u64x4};

/// AVX2 version of [`BlockIq3S`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq3S], a: &[BlockQ8K]) -> f32 {
    let sub_block = |x: &BlockIq3S, ib: usize, q8| {
        let g = u32x8([0, 1, 2, 3, 4, 5, 6, 7].map(|k| IQ3S_GRID[x.index(ib, k)]));
        let s = u64x4([0, 1, 2, 3].map(|l| SIGN_BYTES[x.signs[4 * ib + l] as usize]));
        signed_grid_product(g, q8, s, _mm256_set1_epi16(x.multiplier(ib) as i16))
    };
    grid_dot(w, a, sub_block, |x, y, sumi| {
        x.d.to_f32() * y.d * sumi as f32
    })
}
