//! NEON Q3_K × Q8_K dot product, with the float steps of the packed x86 kernel (`q3_kx16`).

use std::arch::aarch64::*;

use super::BlockQ3K;
use crate::quant::aarch64::{Dot4, dot4_kernels, hsum_i32, load_i8x16, load_u8x32};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockQ3K`]'s `vec_dot`: per super-block the exact integer `S = Σ_g sc_g · Σ (c − 4)·a`
/// over the sixteen 16-value groups `g` (codes `c = low + 4·high`), then
/// `acc = fma(d_w·d_a, S, acc)`, super-blocks in order.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    let (m3, m4, four) = (vdupq_n_u8(3), vdupq_n_u8(4), vdupq_n_s8(4));
    let zero = vdupq_n_s32(0);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let scales = x.group_scales();
        let (qx, _) = x.qs.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<16>();
        let hmask = load_u8x32(&x.hmask);
        let mut sumi = vdupq_n_s32(0);
        for (n, bits) in qx.iter().enumerate() {
            let bits = load_u8x32(bits);
            for j in 0..4 {
                let high_bit = vdupq_n_u8(1 << (4 * n + j));
                for (i, &b) in bits.iter().enumerate() {
                    // Shifting by a run-time amount: a negative left shift is a right shift.
                    let low = vandq_u8(vshlq_u8(b, vdupq_n_s8(-2 * j as i8)), m3);
                    let high = vandq_u8(vtstq_u8(hmask[i], high_bit), m4);
                    let q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, high)), four);
                    let g = 8 * n + 2 * j + i;
                    // SAFETY: the caller guarantees what `D` needs.
                    let p = unsafe { D::dot4(zero, q, load_i8x16(&qy[g])) };
                    sumi = vmlaq_n_s32(sumi, p, scales[g] as i32);
                }
            }
        }
        acc = (x.d.to_f32() * y.d).mul_add(hsum_i32(sumi) as f32, acc);
    }
    acc
}

dot4_kernels!(vec_dot(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
