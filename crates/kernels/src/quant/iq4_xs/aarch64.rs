//! NEON IQ4_XS × Q8_K dot product, with the float steps of the packed x86 kernel
//! (`iq4_xsx16`).

use std::arch::aarch64::*;

use super::BlockIq4Xs;
use crate::quant::aarch64::{
    Dot4, dot4_kernels, dot32, hsum_i32, load_i8x16, load_i8x32, nibbles_32,
};
use crate::quant::iq4_nl::KVALUES;
use crate::quant::q8_k::BlockQ8K;

/// [`BlockIq4Xs`]'s `vec_dot`: per super-block the exact integer
/// `S = Σ_j sc_j · Σ KVALUES[q]·a` over the 32-value sub-blocks `j`, then
/// `acc = fma(d_w·d_a, S, acc)`, super-blocks in order.
///
/// # Safety
/// The CPU must support what `D` needs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn vec_dot<D: Dot4>(w: &[BlockIq4Xs], a: &[BlockQ8K]) -> f32 {
    let table = load_i8x16(&KVALUES);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (qx, _) = x.qs.as_chunks::<16>();
        let (qy, _) = y.qs.as_chunks::<32>();
        let mut sumi = vdupq_n_s32(0);
        for (j, (qx, qy)) in qx.iter().zip(qy).enumerate() {
            let q = nibbles_32(qx).map(|n| vqtbl1q_s8(table, n));
            // SAFETY: the caller guarantees what `D` needs.
            let p = unsafe { dot32::<D>(q, load_i8x32(qy)) };
            sumi = vmlaq_n_s32(sumi, p, x.scale(j));
        }
        acc = (x.d.to_f32() * y.d).mul_add(hsum_i32(sumi) as f32, acc);
    }
    acc
}

dot4_kernels!(vec_dot(w: &[BlockIq4Xs], a: &[BlockQ8K]) -> f32; vec_dot_neon, vec_dot_dotprod);
