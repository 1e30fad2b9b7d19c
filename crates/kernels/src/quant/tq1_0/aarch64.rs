//! NEON TQ1_0 × Q8_K dot products: sixteen bytes at a time, each byte times `3ⁿ` modulo 256
//! and the trit taken as the high byte of `3 · q` (a widening multiply); the trits (0, 1, 2)
//! are dotted with the activations and the activations' sum is subtracted once, which is
//! `Σ (trit − 1) · a` exactly. The float step is the reference's, so the result is
//! bit-identical to it (and to the AVX2 kernel).

use std::arch::aarch64::*;

use super::{BlockTq1_0, POW3};
use crate::quant::aarch64::{Dot4, dot4_kernels, hsum_i32, load_i8x16, load_u8x16};
use crate::quant::q8_k::BlockQ8K;

/// The trits `n` of 16 bytes `x` (0, 1 or 2 each), with `pow` holding `3ⁿ` per byte.
#[inline]
#[target_feature(enable = "neon")]
fn trits(x: uint8x16_t, pow: uint8x16_t) -> int8x16_t {
    let q = vmulq_u8(x, pow);
    let three = vdup_n_u8(3);
    let lo = vreinterpretq_u8_u16(vmull_u8(vget_low_u8(q), three));
    let hi = vreinterpretq_u8_u16(vmull_high_u8(q, vdupq_n_u8(3)));
    vreinterpretq_s8_u8(vuzp2q_u8(lo, hi))
}

/// [`BlockTq1_0`]'s `vec_dot`.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockTq1_0], a: &[BlockQ8K]) -> f32 {
    let pow = POW3.map(|p| vdupq_n_u8(p));
    // Byte `4n + j` of the `qh` vector is trit `n` of `qh[j]`.
    let pow_qh = vcombine_u8(
        vcreate_u8(0x0303_0303_0101_0101),
        vcreate_u8(0x1b1b_1b1b_0909_0909),
    );
    let act = |y: &BlockQ8K, at: usize| {
        let q: &[i8; 16] = y.qs[at..at + 16].try_into().expect("16 activations");
        load_i8x16(q)
    };
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (qs, _) = x.qs.as_chunks::<16>();
        let qs = [0, 1, 2].map(|c| load_u8x16(&qs[c]));
        let mut acc = vdupq_n_s32(0);
        for (n, &pow) in pow.iter().enumerate() {
            for (half, &bytes) in qs[..2].iter().enumerate() {
                // SAFETY: the caller guarantees what `D` needs.
                acc = unsafe { D::dot4(acc, trits(bytes, pow), act(y, 32 * n + 16 * half)) };
            }
            // SAFETY: as above.
            acc = unsafe { D::dot4(acc, trits(qs[2], pow), act(y, 160 + 16 * n)) };
        }
        let qh = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes(x.qh)));
        // SAFETY: as above.
        acc = unsafe { D::dot4(acc, trits(qh, pow_qh), act(y, 240)) };
        let a_sum: i32 = y.bsums.iter().map(|&s| s as i32).sum();
        let sum = hsum_i32(acc) - a_sum;
        sumf += sum as f32 * (x.d.to_f32() * y.d);
    }
    sumf
}

dot4_kernels!(vec_dot(w: &[BlockTq1_0], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
