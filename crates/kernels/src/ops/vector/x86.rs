//! AVX2+FMA vector kernels; eight lanes at a time, the tail through the scalar references.

use std::arch::x86_64::*;

/// `e^x` for eight lanes (Cephes' polynomial after reduction by ln 2; within a few ulp of
/// `f32::exp`, inputs clamped to `±88.376`).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let x = _mm256_min_ps(
        _mm256_max_ps(x, _mm256_set1_ps(-88.376_26)),
        _mm256_set1_ps(88.376_26),
    );
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let p = _mm256_fmadd_ps(
        p,
        _mm256_mul_ps(r, r),
        _mm256_add_ps(r, _mm256_set1_ps(1.0)),
    );
    // 2^n through the exponent bits; n + 127 is at least 0 after the clamp.
    let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        _mm256_set1_epi32(127),
    ));
    _mm256_mul_ps(p, _mm256_castsi256_ps(bits))
}

/// `x / (1 + e^(-z))`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn times_sigmoid(x: __m256, z: __m256) -> __m256 {
    let one = _mm256_set1_ps(1.0);
    _mm256_div_ps(
        x,
        _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), z))),
    )
}

/// Applies `f` to full lanes of eight and `tail` to the rest.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn gated_with(
    gate: &mut [f32],
    up: &[f32],
    f: impl Fn(__m256) -> __m256,
    tail: fn(&mut [f32], &[f32]),
) {
    let (g8, gt) = gate.as_chunks_mut::<8>();
    let (u8, ut) = up.as_chunks::<8>();
    for (g, u) in g8.iter_mut().zip(u8) {
        // SAFETY: each load and store touches exactly the eight floats of one chunk.
        unsafe {
            let x = _mm256_loadu_ps(g.as_ptr());
            let y = _mm256_mul_ps(f(x), _mm256_loadu_ps(u.as_ptr()));
            _mm256_storeu_ps(g.as_mut_ptr(), y);
        }
    }
    tail(gt, ut);
}

/// AVX2 gated SiLU: `gate = gate / (1 + e^-gate) * up`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn gated_silu(gate: &mut [f32], up: &[f32]) {
    gated_with(
        gate,
        up,
        |x| times_sigmoid(x, x),
        super::gated_silu_reference,
    );
}

/// AVX2 gated tanh GELU, as `x · sigmoid(2u)` with `u = √(2/π)·x·(1 + 0.044715·x²)`
/// (equal to `0.5·x·(1 + tanh u)`).
#[target_feature(enable = "avx2,fma")]
pub(super) fn gated_gelu_tanh(gate: &mut [f32], up: &[f32]) {
    gated_with(
        gate,
        up,
        |x| {
            let x2 = _mm256_mul_ps(x, x);
            let inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715), x2, _mm256_set1_ps(1.0));
            let two_u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0 * 0.797_884_6), x), inner);
            times_sigmoid(x, two_u)
        },
        super::gated_gelu_tanh_reference,
    );
}

/// AVX2 `y += a * x` (one fused multiply-add per element).
#[target_feature(enable = "avx2,fma")]
pub(super) fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let (x8, xt) = x.as_chunks::<8>();
    let (y8, yt) = y.as_chunks_mut::<8>();
    let av = _mm256_set1_ps(a);
    for (x, y) in x8.iter().zip(y8) {
        // SAFETY: each load and store touches exactly the eight floats of one chunk.
        unsafe {
            let v = _mm256_fmadd_ps(av, _mm256_loadu_ps(x.as_ptr()), _mm256_loadu_ps(y.as_ptr()));
            _mm256_storeu_ps(y.as_mut_ptr(), v);
        }
    }
    for (y, &x) in yt.iter_mut().zip(xt) {
        *y = a.mul_add(x, *y);
    }
}

/// AVX2 four axpys in one pass: per element the same fused multiply-adds, in the same order, as
/// four [`axpy`] calls.
#[target_feature(enable = "avx2,fma")]
pub(super) fn axpy4(a: [f32; 4], x: [&[f32]; 4], y: &mut [f32]) {
    let full = y.len() / 8 * 8;
    let av = a.map(|a| _mm256_set1_ps(a));
    for c in (0..full).step_by(8) {
        // SAFETY: every load and the store touch the eight floats at `c` of slices at least
        // `full` long (the caller checked the lengths).
        unsafe {
            let mut v = _mm256_loadu_ps(y.as_ptr().add(c));
            for (a, x) in av.iter().zip(&x) {
                v = _mm256_fmadd_ps(*a, _mm256_loadu_ps(x.as_ptr().add(c)), v);
            }
            _mm256_storeu_ps(y.as_mut_ptr().add(c), v);
        }
    }
    for (a, x) in a.into_iter().zip(x) {
        for (y, &x) in y[full..].iter_mut().zip(&x[full..]) {
            *y = a.mul_add(x, *y);
        }
    }
}

/// AVX2 [`super::VectorKernels::dot4`]: the query is loaded once for the four keys.
#[target_feature(enable = "avx2,fma")]
pub(super) fn dot4(q: &[f32], k: [&[f32]; 4]) -> [f32; 4] {
    let full = q.len() / 8 * 8;
    let mut acc = [_mm256_setzero_ps(); 4];
    for c in (0..full).step_by(8) {
        // SAFETY: every load reads the eight floats at `c` of slices at least `full` long (the
        // caller checked the lengths).
        unsafe {
            let qv = _mm256_loadu_ps(q.as_ptr().add(c));
            for (acc, k) in acc.iter_mut().zip(&k) {
                *acc = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k.as_ptr().add(c)), *acc);
            }
        }
    }
    // Per key: lanes (0+1, 2+3, 4+5, 6+7), then (01+23, 45+67), then the two halves.
    let h01 = _mm256_hadd_ps(acc[0], acc[1]);
    let h23 = _mm256_hadd_ps(acc[2], acc[3]);
    let h = _mm256_hadd_ps(h01, h23);
    let sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let mut out = [0.0f32; 4];
    // SAFETY: writes exactly the four floats of `out`.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), sums) };
    for (o, k) in out.iter_mut().zip(&k) {
        for e in full..q.len() {
            *o = q[e].mul_add(k[e], *o);
        }
    }
    out
}
