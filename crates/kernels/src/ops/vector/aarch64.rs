//! NEON vector kernels: attention's scores and weighted values and the f16 conversion, each with
//! the bits of the scalar reference (the same lanes and fused multiply-adds); the gated
//! activations and the shifted exponential through the x86 kernels' polynomial exponential,
//! four lanes at a time, within a few ulp of the reference.

use std::arch::aarch64::*;

use half::f16;

use crate::quant::float::aarch64::f16x8_to_f32;

/// NEON [`super::VectorKernels::scaled_dots`]: eight lanes in two registers, each lane's fused
/// multiply-adds and the final sum in the reference's order.
#[target_feature(enable = "neon")]
pub(super) fn scaled_dots(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) -> f32 {
    if q.is_empty() {
        return super::scaled_dots_reference(q, keys, scale, out);
    }
    let full = q.len() / 8 * 8;
    let mut max = f32::NEG_INFINITY;
    for (o, k) in out.iter_mut().zip(keys.chunks_exact(q.len())) {
        let (mut lo, mut hi) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
        for c in (0..full).step_by(8) {
            // SAFETY: each load reads four of the eight values at `c`, `c + 8 <= q.len()`, of
            // rows `q.len()` long.
            unsafe {
                let (q0, q1) = (
                    vld1q_f32(q.as_ptr().add(c)),
                    vld1q_f32(q.as_ptr().add(c + 4)),
                );
                let (k0, k1) = (
                    vld1q_f32(k.as_ptr().add(c)),
                    vld1q_f32(k.as_ptr().add(c + 4)),
                );
                lo = vfmaq_f32(lo, q0, k0);
                hi = vfmaq_f32(hi, q1, k1);
            }
        }
        // ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))
        let pairs = vpaddq_f32(lo, hi);
        let quads = vpaddq_f32(pairs, pairs);
        let mut sum = vgetq_lane_f32::<0>(quads) + vgetq_lane_f32::<1>(quads);
        for e in full..q.len() {
            sum = q[e].mul_add(k[e], sum);
        }
        *o = sum * scale;
        max = max.max(*o);
    }
    max
}

/// NEON [`super::VectorKernels::axpy_rows`]: per element one fused multiply-add per row, rows in
/// order, four elements at a time.
#[target_feature(enable = "neon")]
pub(super) fn axpy_rows(w: &[f32], rows: &[f32], y: &mut [f32]) {
    if y.is_empty() {
        return;
    }
    let full = y.len() / 4 * 4;
    for (&a, x) in w.iter().zip(rows.chunks_exact(y.len())) {
        let av = vdupq_n_f32(a);
        for c in (0..full).step_by(4) {
            // SAFETY: reads and writes the four values at `c`, `c + 4 <= y.len() == x.len()`.
            unsafe {
                let acc = vfmaq_f32(
                    vld1q_f32(y.as_ptr().add(c)),
                    av,
                    vld1q_f32(x.as_ptr().add(c)),
                );
                vst1q_f32(y.as_mut_ptr().add(c), acc);
            }
        }
        for (y, &x) in y[full..].iter_mut().zip(&x[full..]) {
            *y = a.mul_add(x, *y);
        }
    }
}

/// NEON [`super::VectorKernels::f16_to_f32`]: eight values per conversion (`fcvtl`, exact; a
/// NaN keeps its payload and comes out quiet).
#[target_feature(enable = "neon")]
pub(super) fn f16_to_f32(src: &[f16], out: &mut [f32]) {
    let (s8, st) = src.as_chunks::<8>();
    let (o8, ot) = out.as_chunks_mut::<8>();
    for (s, o) in s8.iter().zip(o8) {
        // SAFETY: reads the 16 bytes of `s` and writes the 32 bytes of `o`.
        unsafe {
            let [lo, hi] = f16x8_to_f32(vld1q_u16(s.as_ptr().cast()));
            vst1q_f32(o.as_mut_ptr(), lo);
            vst1q_f32(o.as_mut_ptr().add(4), hi);
        }
    }
    for (o, h) in ot.iter_mut().zip(st) {
        *o = h.to_f32();
    }
}

/// `e^x` for four lanes: the x86 kernels' `exp8` (Cephes' polynomial after reduction by ln 2;
/// within a few ulp of `f32::exp`, inputs clamped to `±88.376`) with the same steps.
#[inline]
#[target_feature(enable = "neon")]
fn exp4(x: float32x4_t) -> float32x4_t {
    let max = super::EXP_INPUT_MAX;
    let x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-max)), vdupq_n_f32(max));
    let n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(std::f32::consts::LOG2_E)));
    let [ln2_hi, ln2_lo] = super::EXP_LN2;
    let r = vfmsq_f32(x, n, vdupq_n_f32(ln2_hi));
    let r = vfmsq_f32(r, n, vdupq_n_f32(ln2_lo));
    let [first, rest @ ..] = super::EXP_POLY;
    let mut p = vdupq_n_f32(first);
    for c in rest {
        p = vfmaq_f32(vdupq_n_f32(c), p, r);
    }
    let p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0)), p, vmulq_f32(r, r));
    // 2^n through the exponent bits; n + 127 is at least 0 after the clamp (and `n` is an
    // integer, so the truncating conversion is exact).
    let bits = vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)));
    vmulq_f32(p, vreinterpretq_f32_s32(bits))
}

elementwise_kernels!(
    "neon", float32x4_t, 4 lanes,
    load: vld1q_f32, store: vst1q_f32, splat: vdupq_n_f32,
    add: vaddq_f32, sub: vsubq_f32, mul: vmulq_f32, div: vdivq_f32, exp: exp4,
    neg: |z| vnegq_f32(z), mul_add: |a, b, c| vfmaq_f32(c, a, b),
);
