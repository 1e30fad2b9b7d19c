//! AVX2 IQ1_M × Q8_K dot product, as IQ1_S's with the shifts' signs applied to the activations
//! per group of eight (`vpsignb`) and two scales per sub-block; exact integer sums and the
//! reference's float steps, so bit-identical to it.

use std::arch::x86_64::*;

use super::BlockIq1M;
use crate::quant::iq1_s::DELTA;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{hsum_i32_8, load_i8x32, prefetch_ahead, scale_pair, u64x4};

/// AVX2 version of [`BlockIq1M`]'s `vec_dot`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockIq1M], a: &[BlockQ8K]) -> f32 {
    let ones = _mm256_set1_epi8(1);
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        let (q8, _) = y.qs.as_chunks::<32>();
        let mut grid_acc = _mm256_setzero_si256();
        let mut shift_acc = _mm256_setzero_si256();
        for (ib, q8) in q8.iter().enumerate() {
            let q8 = load_i8x32(q8);
            let g = u64x4([0, 1, 2, 3].map(|l| x.entry(4 * ib + l)));
            let signs = u64x4([0, 1, 2, 3].map(|l| match x.delta_sign(4 * ib + l) {
                1 => 0x0101_0101_0101_0101,
                _ => u64::MAX,
            }));
            let ls = scale_pair(x.scale(2 * ib) as i16, x.scale(2 * ib + 1) as i16);
            let grid = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q8, g));
            let shift = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q8, signs));
            grid_acc = _mm256_add_epi32(grid_acc, _mm256_madd_epi16(grid, ls));
            shift_acc = _mm256_add_epi32(shift_acc, _mm256_madd_epi16(shift, ls));
        }
        let (grid_sum, shift_sum) = (hsum_i32_8(grid_acc), hsum_i32_8(shift_acc));
        sumf += x.d().to_f32() * y.d * (grid_sum as f32 + DELTA * shift_sum as f32);
    }
    sumf
}
