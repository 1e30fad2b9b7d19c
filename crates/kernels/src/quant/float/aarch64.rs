//! NEON dot products of F32, F16 and BF16 rows with f32 activations, with the lanes and float
//! steps of the AVX2 kernels (`x86`), so they return the same bits: four 8-lane fused
//! multiply-add accumulators (two NEON registers each) over each 32 values, summed as
//! `(a0 + a1) + (a2 + a3)` and across lanes as the x86 horizontal sum, then a scalar tail.

use std::arch::aarch64::*;
use std::arch::asm;

use half::{bf16, f16};

use super::dot_from;

/// Loads 8 floats.
#[inline]
#[target_feature(enable = "neon")]
fn load_f32x8(x: &[f32; 8]) -> [float32x4_t; 2] {
    // SAFETY: each load reads 4 of the 8 floats `x` borrows; NEON loads need no alignment.
    unsafe { [vld1q_f32(x.as_ptr()), vld1q_f32(x.as_ptr().add(4))] }
}

/// Loads 8 halves as floats (exact; `fcvtl` is part of every AArch64 CPU's NEON).
#[inline]
#[target_feature(enable = "neon")]
fn load_f16x8(x: &[f16; 8]) -> [float32x4_t; 2] {
    // SAFETY: reads exactly the 16 bytes `x` borrows; NEON loads need no alignment.
    let bits = unsafe { vld1q_u16(x.as_ptr().cast()) };
    f16x8_to_f32(bits)
}

/// Converts 8 f16 values (bits) to f32, exactly.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f16x8_to_f32(bits: uint16x8_t) -> [float32x4_t; 2] {
    let (lo, hi): (float32x4_t, float32x4_t);
    // SAFETY: `fcvtl` and `fcvtl2` only read and write the named vector registers.
    unsafe {
        asm!(
            "fcvtl {lo:v}.4s, {x:v}.4h",
            "fcvtl2 {hi:v}.4s, {x:v}.8h",
            x = in(vreg) bits,
            lo = out(vreg) lo,
            hi = out(vreg) hi,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    [lo, hi]
}

/// Loads 8 bfloat16 values as floats.
#[inline]
#[target_feature(enable = "neon")]
fn load_bf16x8(x: &[bf16; 8]) -> [float32x4_t; 2] {
    // SAFETY: reads exactly the 16 bytes `x` borrows; NEON loads need no alignment.
    let bits = unsafe { vld1q_u16(x.as_ptr().cast()) };
    [
        vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(bits))),
        vreinterpretq_f32_u32(vshll_high_n_u16::<16>(bits)),
    ]
}

/// The x86 kernels' `hsum_float_8` of eight lanes (`lo` lanes 0..4, `hi` lanes 4..8):
/// `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
#[inline]
#[target_feature(enable = "neon")]
fn hsum_float_8([lo, hi]: [float32x4_t; 2]) -> f32 {
    let r = vaddq_f32(hi, lo);
    let s = vadd_f32(vget_low_f32(r), vget_high_f32(r));
    vget_lane_f32::<0>(s) + vget_lane_f32::<1>(s)
}

/// Lane-wise `a + b` of two 8-lane values.
#[inline]
#[target_feature(enable = "neon")]
fn add8(a: [float32x4_t; 2], b: [float32x4_t; 2]) -> [float32x4_t; 2] {
    [vaddq_f32(a[0], b[0]), vaddq_f32(a[1], b[1])]
}

/// Declares the NEON dot product `$name` of `$t` rows (loaded eight at a time by `$load`).
macro_rules! float_dot {
    ($($name:ident: $t:ty, $load:ident;)*) => {$(
        #[doc = concat!("NEON version of `", stringify!($t), "`'s `vec_dot`.")]
        #[target_feature(enable = "neon")]
        pub(crate) fn $name(w: &[$t], a: &[f32]) -> f32 {
            let (wc, wt) = w.as_chunks::<32>();
            let (ac, at) = a[..w.len()].as_chunks::<32>();
            let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
            for (x, y) in wc.iter().zip(ac) {
                let (x8, _) = x.as_chunks::<8>();
                let (y8, _) = y.as_chunks::<8>();
                for k in 0..4 {
                    let (xs, ys) = ($load(&x8[k]), load_f32x8(&y8[k]));
                    for h in 0..2 {
                        acc[k][h] = vfmaq_f32(acc[k][h], xs[h], ys[h]);
                    }
                }
            }
            let sum = add8(add8(acc[0], acc[1]), add8(acc[2], acc[3]));
            dot_from(hsum_float_8(sum), wt, at)
        }
    )*};
}

float_dot! {
    vec_dot_f32: f32, load_f32x8;
    vec_dot_f16: f16, load_f16x8;
    vec_dot_bf16: bf16, load_bf16x8;
}
