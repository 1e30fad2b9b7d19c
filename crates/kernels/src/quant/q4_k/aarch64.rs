//! NEON Q4_K × Q8_K dot product, with the float steps of the packed x86 kernel (`q4_kx16`).

use std::arch::aarch64::*;

use super::BlockQ4K;
use crate::quant::aarch64::{
    Dot4, dot4_kernels, dot32, hsum_i32, load_i8x32, load_u8x32, mins_dot_q8k,
};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::scale_min_k::ScaleMinK;
use crate::quant::util::scales_mins_k4;

/// [`BlockQ4K`]'s `vec_dot` ([`scale_min_k_dot`]).
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = vdupq_n_u8(0xF);
    let codes = |x: &BlockQ4K, c: usize| {
        let (qx, _) = x.qs.as_chunks::<32>();
        let bits = load_u8x32(&qx[c]);
        (
            bits.map(|b| vreinterpretq_s8_u8(vandq_u8(b, m4))),
            bits.map(|b| vreinterpretq_s8_u8(vshrq_n_u8::<4>(b))),
        )
    };
    // SAFETY: the caller guarantees what `D` needs.
    unsafe { scale_min_k_dot::<D, _>(w, a, codes) }
}

/// The frame of the Q4_K and Q5_K dot products: per super-block the exact integers
/// `S = Σ_j sc_j · Σ q·a` and `M = Σ_j m_j · Σ a` over the sub-blocks `j` (`codes(x, c)` the
/// codes of sub-blocks `2c` and `2c + 1`), then `acc = fma(d_w·d_a, S, acc)` and
/// `acc = fma(−(dmin_w·d_a), M, acc)`, super-blocks in order.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn scale_min_k_dot<D: Dot4, W: ScaleMinK>(
    w: &[W],
    a: &[BlockQ8K],
    codes: impl Fn(&W, usize) -> ([int8x16_t; 2], [int8x16_t; 2]),
) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (d, dmin, packed) = x.header();
        let scales_mins = scales_mins_k4(packed);
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = vdupq_n_s32(0);
        for c in 0..4 {
            let (lo, hi) = codes(x, c);
            // SAFETY: the caller guarantees what `D` needs.
            let (pl, ph) = unsafe {
                (
                    dot32::<D>(lo, load_i8x32(&qy[2 * c])),
                    dot32::<D>(hi, load_i8x32(&qy[2 * c + 1])),
                )
            };
            sumi = vmlaq_n_s32(sumi, pl, scales_mins[2 * c] as i32);
            sumi = vmlaq_n_s32(sumi, ph, scales_mins[2 * c + 1] as i32);
        }
        let mins: &[u8; 8] = scales_mins[8..].try_into().expect("eight mins");
        let (s, m) = (hsum_i32(sumi), mins_dot_q8k(mins, y));
        let d = d.to_f32() * y.d;
        let dmin = dmin.to_f32() * y.d;
        acc = d.mul_add(s as f32, acc);
        acc = (-dmin).mul_add(m as f32, acc);
    }
    acc
}

dot4_kernels!(vec_dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
