//! NEON Q2_K × Q8_K dot product, with the float steps of the packed x86 kernel (`q2_kx16`).

use std::arch::aarch64::*;

use super::BlockQ2K;
use crate::quant::aarch64::{Dot4, dot4_kernels, hsum_i32, load_i8x16, load_u8x32};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockQ2K`]'s `vec_dot`: per super-block the exact integers `S = Σ_g sc_g · Σ q·a` and
/// `M = Σ_g m_g · Σa` over the sixteen 16-value groups `g`, then `acc = fma(d_w·d_a, S, acc)`
/// and `acc = fma(−(dmin_w·d_a), M, acc)`, super-blocks in order.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let m3 = vdupq_n_u8(3);
    let zero = vdupq_n_s32(0);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<16>();
        let mut sumi = vdupq_n_s32(0);
        for (n, bits) in qx.iter().enumerate() {
            let bits = load_u8x32(bits);
            for j in 0..4 {
                for (i, &b) in bits.iter().enumerate() {
                    // Shifting by a run-time amount: a negative left shift is a right shift.
                    let shift = vdupq_n_s8(-2 * j as i8);
                    let q = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b, shift), m3));
                    let g = 8 * n + 2 * j + i;
                    // SAFETY: the caller guarantees what `D` needs.
                    let p = unsafe { D::dot4(zero, q, load_i8x16(&qy[g])) };
                    sumi = vmlaq_n_s32(sumi, p, (x.scales[g] & 0xF) as i32);
                }
            }
        }
        let m = mins_dot_sums_16(&x.scales, &y.bsums);
        let d = x.d.to_f32() * y.d;
        let dmin = x.dmin.to_f32() * y.d;
        acc = d.mul_add(hsum_i32(sumi) as f32, acc);
        acc = (-dmin).mul_add(m as f32, acc);
    }
    acc
}

/// The exact `Σ_g (scales[g] >> 4) · bsums[g]`: the group mins against the activation sums.
#[inline]
#[target_feature(enable = "neon")]
fn mins_dot_sums_16(scales: &[u8; 16], bsums: &[i16; 16]) -> i32 {
    // SAFETY: the loads read exactly the 16 scale bytes and 16 sums the arrays hold.
    let (sc, s0, s1) = unsafe {
        (
            vld1q_u8(scales.as_ptr()),
            vld1q_s16(bsums.as_ptr()),
            vld1q_s16(bsums.as_ptr().add(8)),
        )
    };
    let mins = vshrq_n_u8::<4>(sc);
    let m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    let m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
    let lo = vaddq_s32(
        vmull_s16(vget_low_s16(m0), vget_low_s16(s0)),
        vmull_high_s16(m0, s0),
    );
    let hi = vaddq_s32(
        vmull_s16(vget_low_s16(m1), vget_low_s16(s1)),
        vmull_high_s16(m1, s1),
    );
    vaddvq_s32(vaddq_s32(lo, hi))
}

dot4_kernels!(vec_dot(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
