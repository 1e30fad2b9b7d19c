//! NEON Q6_K × Q8_K dot product, with the float steps of the packed x86 kernel (`q6_kx16`).

use std::arch::aarch64::*;

use super::BlockQ6K;
use crate::quant::aarch64::{Dot4, dot4_kernels, hsum_i32, load_i8x32, load_u8x32};
use crate::quant::q8_k::BlockQ8K;

/// [`BlockQ6K`]'s `vec_dot`: per super-block the exact integer `S = Σ_g sc_g · Σ (q − 32)·a`
/// over the sixteen 16-value groups `g`, then `acc = fma(d_w·d_a, S, acc)`, super-blocks in
/// order.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let (m4, m30, bias) = (vdupq_n_u8(0xF), vdupq_n_u8(0x30), vdupq_n_s8(32));
    let zero = vdupq_n_s32(0);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (ql, _) = x.ql.as_chunks::<32>();
        let (qh, _) = x.qh.as_chunks::<32>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = vdupq_n_s32(0);
        for n in 0..2 {
            let (lo, hi, h) = (
                load_u8x32(&ql[2 * n]),
                load_u8x32(&ql[2 * n + 1]),
                load_u8x32(&qh[n]),
            );
            // The four 32-value chunks of this half: low nibbles of `lo`, of `hi`, then their
            // high nibbles, each with its two bits of `h` moved to bits 4 and 5.
            let codes = |k: usize, i: usize| {
                let low = match k {
                    0 => vandq_u8(lo[i], m4),
                    1 => vandq_u8(hi[i], m4),
                    2 => vshrq_n_u8::<4>(lo[i]),
                    _ => vshrq_n_u8::<4>(hi[i]),
                };
                let top = match k {
                    0 => vshlq_n_u8::<4>(h[i]),
                    1 => vshlq_n_u8::<2>(h[i]),
                    2 => h[i],
                    _ => vshrq_n_u8::<2>(h[i]),
                };
                vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, vandq_u8(top, m30))), bias)
            };
            for k in 0..4 {
                let ys = load_i8x32(&qy[4 * n + k]);
                let g = 8 * n + 2 * k;
                for (i, y) in ys.into_iter().enumerate() {
                    // SAFETY: the caller guarantees what `D` needs.
                    let p = unsafe { D::dot4(zero, codes(k, i), y) };
                    sumi = vmlaq_n_s32(sumi, p, x.scales[g + i] as i32);
                }
            }
        }
        let d = x.d.to_f32() * y.d;
        acc = d.mul_add(hsum_i32(sumi) as f32, acc);
    }
    acc
}

dot4_kernels!(vec_dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
