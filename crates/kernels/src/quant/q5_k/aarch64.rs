//! NEON Q5_K × Q8_K dot product, with the float steps of the packed x86 kernel (`q5_kx16`).

use std::arch::aarch64::*;

use super::BlockQ5K;
use crate::quant::aarch64::{
    Dot4, dot4_kernels, dot32, hsum_i32, load_i8x32, load_u8x32, mins_dot_q8k,
};
use crate::quant::q8_k::BlockQ8K;
use crate::quant::util::scales_mins_k4;

/// [`BlockQ5K`]'s `vec_dot`: Q4_K's arithmetic with codes `q < 32` (the fifth bit of
/// sub-block `j` is bit `j` of each `qh` byte).
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let (m4, m16) = (vdupq_n_u8(0xF), vdupq_n_u8(0x10));
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let scales_mins = scales_mins_k4(&x.scales);
        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let qh = load_u8x32(&x.qh);
        // Bit 4 set where sub-block `j`'s fifth bit is.
        let high = |j: usize| qh.map(|h| vandq_u8(vtstq_u8(h, vdupq_n_u8(1 << j)), m16));
        let mut sumi = vdupq_n_s32(0);
        for (c, bits) in qx.iter().enumerate() {
            let bits = load_u8x32(bits);
            let (hl, hh) = (high(2 * c), high(2 * c + 1));
            let lo = [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(vandq_u8(bits[i], m4), hl[i])));
            let hi = [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8::<4>(bits[i]), hh[i])));
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
        let d = x.d.to_f32() * y.d;
        let dmin = x.dmin.to_f32() * y.d;
        acc = d.mul_add(s as f32, acc);
        acc = (-dmin).mul_add(m as f32, acc);
    }
    acc
}

dot4_kernels!(vec_dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
