//! AVX-512 Q4_K × Q8_K dot product: ggml's AVX2 algorithm on 64-byte registers, two
//! sub-blocks per register, with VNNI's `vpdpwssd` fusing the scale multiply and the sum.

use std::arch::x86_64::*;

use super::BlockQ4K;
use crate::quant::avx512::{i16_pair_broadcast_control_512, load_i8x64, load_u8x64};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::util::scales_mins_k4;
use crate::quant::x86::{f16x2_to_f32, hsum_i32_4, load_bytes_16, prefetch_ahead, q8k_sums_32};

/// AVX-512 version of [`BlockQ4K`]'s `vec_dot`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm512_set1_epi8(0xF);
    let mut acc = _mm512_setzero_ps();
    let mut acc_m = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        // Lanes 0..8: sub-block scales; 8..16: sub-block mins.
        let scales_mins = _mm256_cvtepu8_epi16(load_bytes_16(&scales_mins_k4(&x.scales)));
        let mins = _mm256_extracti128_si256::<1>(scales_mins);
        let sum_mins = hsum_i32_4(_mm_madd_epi16(mins, q8k_sums_32(y)));
        // [y.d * d, y.d * dmin]
        let d = _mm_mul_ps(_mm_set1_ps(y.d), f16x2_to_f32(x.d, x.dmin));
        acc_m += _mm_cvtss_f32(_mm_movehdup_ps(d)) * sum_mins as f32;

        let scales = _mm512_broadcast_i32x4(_mm256_castsi256_si128(scales_mins));
        let (qx, _) = x.qs.as_chunks::<64>();
        let (qy, _) = y.qs.as_chunks::<64>();
        let mut sumi = [_mm512_setzero_si512(); 2];
        for h in 0..2 {
            // Bytes 32c..32c+32 hold sub-block 2c in their low nibbles, 2c + 1 in the high.
            let bits = load_u8x64(&qx[h]);
            let lo = _mm512_and_si512(bits, m4);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m4);
            for k in 0..2 {
                let j = 4 * h + 2 * k;
                // Sub-blocks j and j + 1, in the order of the activations.
                let q = if k == 0 {
                    _mm512_shuffle_i64x2::<0x44>(lo, hi)
                } else {
                    _mm512_shuffle_i64x2::<0xEE>(lo, hi)
                };
                let p = _mm512_maddubs_epi16(q, load_i8x64(&qy[2 * h + k]));
                let sc = _mm512_shuffle_epi8(scales, i16_pair_broadcast_control_512(j, j + 1));
                sumi[k] = _mm512_dpwssd_epi32(sumi[k], sc, p);
            }
        }
        let sumi = _mm512_add_epi32(sumi[0], sumi[1]);
        let d = _mm512_broadcastss_ps(d);
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi), acc);
    }
    _mm512_reduce_add_ps(acc) - acc_m
}
