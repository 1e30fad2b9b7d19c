//! AVX-512 Q6_K × Q8_K dot product: the AVX2 kernel's algorithm on 64-byte registers (four
//! 16-value groups per register, high bits placed with per-half variable shifts), with VNNI's
//! `vpdpwssd` fusing the group-scale multiply and the sum.

use std::arch::x86_64::*;

use super::BlockQ6K;
use crate::quant::avx512::{load_i8x64, load_u8x64};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::x86::{f16_broadcast_8, hsum_float_8, load_u8x32, prefetch_ahead};

/// AVX-512 version of [`BlockQ6K`]'s `vec_dot`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn vec_dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm512_set1_epi8(0xF);
    let m2 = _mm512_set1_epi8(3);
    let half_shifts = |lo: i16, hi: i16| {
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_set1_epi16(lo)),
            _mm256_set1_epi16(hi),
        )
    };
    let shifts_lo = half_shifts(0, 2);
    let shifts_hi = half_shifts(4, 6);
    // Group `4s + q` (q = 128-bit quarter) of eight, broadcast over its quarter.
    let group_control = |s: i8| {
        let c = |q: i8| [2 * (4 * s + q) + 1, 2 * (4 * s + q)];
        let [a1, a0] = c(0);
        let [b1, b0] = c(1);
        let [c1, c0] = c(2);
        let [d1, d0] = c(3);
        _mm512_set_epi8(
            d1, d0, d1, d0, d1, d0, d1, d0, d1, d0, d1, d0, d1, d0, d1, d0, //
            c1, c0, c1, c0, c1, c0, c1, c0, c1, c0, c1, c0, c1, c0, c1, c0, //
            b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, //
            a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0,
        )
    };
    let control = [group_control(0), group_control(1)];
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        prefetch_ahead(x);
        // SAFETY: reads exactly the 16 group scales and the 32 bytes of the 16 block sums.
        let (scales, bsums) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr().cast())),
                _mm256_loadu_si256(y.bsums.as_ptr().cast()),
            )
        };
        let bias = _mm256_slli_epi32::<5>(_mm256_madd_epi16(scales, bsums));
        let (ql, _) = x.ql.as_chunks::<64>();
        let (qh, _) = x.qh.as_chunks::<32>();
        let (q8, _) = y.qs.as_chunks::<64>();
        let mut sumi = [_mm512_setzero_si512(); 2];
        for n in 0..2 {
            // Scales of groups 8n..8n+8 in every 128-bit quarter.
            let sc = if n == 0 {
                _mm512_broadcast_i32x4(_mm256_castsi256_si128(scales))
            } else {
                _mm512_broadcast_i32x4(_mm256_extracti128_si256::<1>(scales))
            };
            let bits = load_u8x64(&ql[n]);
            let h = _mm512_broadcast_i64x4(load_u8x32(&qh[n]));
            let high =
                |shifts| _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(h, shifts), m2));
            // Values 128n..128n+64, then 128n+64..128n+128.
            let q = [
                _mm512_or_si512(_mm512_and_si512(bits, m4), high(shifts_lo)),
                _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m4),
                    high(shifts_hi),
                ),
            ];
            for (s, q) in q.into_iter().enumerate() {
                let p = _mm512_maddubs_epi16(q, load_i8x64(&q8[2 * n + s]));
                let scale = _mm512_shuffle_epi8(sc, control[s]);
                sumi[s] = _mm512_dpwssd_epi32(sumi[s], scale, p);
            }
        }
        let sumi = _mm512_add_epi32(sumi[0], sumi[1]);
        let sumi = _mm256_add_epi32(
            _mm512_castsi512_si256(sumi),
            _mm512_extracti64x4_epi64::<1>(sumi),
        );
        let sumi = _mm256_sub_epi32(sumi, bias);
        let d = _mm256_mul_ps(_mm256_set1_ps(y.d), f16_broadcast_8(x.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
