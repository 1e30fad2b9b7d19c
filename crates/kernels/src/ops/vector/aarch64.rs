//! NEON vector kernels: attention's scores and weighted values and the f16 conversion, each with
//! the bits of the scalar reference (the same lanes and fused multiply-adds). The gated
//! activations and the exponential keep the reference.

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
