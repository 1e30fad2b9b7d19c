//! NEON Q5_K × Q8_K dot product, with the float steps of the packed x86 kernel (`q5_kx16`).

use std::arch::aarch64::*;

use super::BlockQ5K;
use crate::quant::aarch64::{Dot4, dot4_kernels, load_u8x32};
use crate::quant::q4_k::aarch64::scale_min_k_dot;
use crate::quant::q8_k::BlockQ8K;

/// [`BlockQ5K`]'s `vec_dot`: Q4_K's ([`scale_min_k_dot`]) with codes `q < 32` (the fifth bit
/// of sub-block `j` is bit `j` of each `qh` byte).
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let (m4, m16) = (vdupq_n_u8(0xF), vdupq_n_u8(0x10));
    let codes = |x: &BlockQ5K, c: usize| {
        let qh = load_u8x32(&x.qh);
        // Bit 4 set where sub-block `j`'s fifth bit is.
        let high = |j: usize| qh.map(|h| vandq_u8(vtstq_u8(h, vdupq_n_u8(1 << j)), m16));
        let (qx, _) = x.qs.as_chunks::<32>();
        let bits = load_u8x32(&qx[c]);
        let (hl, hh) = (high(2 * c), high(2 * c + 1));
        (
            [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(vandq_u8(bits[i], m4), hl[i]))),
            [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8::<4>(bits[i]), hh[i]))),
        )
    };
    // SAFETY: the caller guarantees what `D` needs.
    unsafe { scale_min_k_dot::<D, _>(w, a, codes) }
}

dot4_kernels!(vec_dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
