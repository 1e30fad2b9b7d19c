//! AVX2+FMA vector kernels; eight lanes at a time, the tail through the scalar references.
//! Attention's kernels read f16 rows (F16C) and q8_0 rows (codes times scale) in registers.

use std::arch::x86_64::*;

use half::f16;

use super::RowKernels;
use super::row_values::{Q8_0_BLOCK, RowValues};
use crate::quant::q8_0::BlockQ8_0;

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

/// Rows whose values load eight at a time as f32, exactly as [`RowValues::value`] gives them.
pub(super) trait Load8: RowValues {
    /// Values `c..c + 8` as f32.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C, and `c + 8` must not pass the row's end (for q8_0,
    /// `c` a multiple of 8, so that the eight stay in one block).
    unsafe fn load8(&self, c: usize) -> __m256;
}

impl Load8 for [f32] {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(&self, c: usize) -> __m256 {
        // SAFETY: the caller keeps `c + 8` within the row.
        unsafe { _mm256_loadu_ps(self.as_ptr().add(c)) }
    }
}

impl Load8 for [f16] {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(&self, c: usize) -> __m256 {
        // SAFETY: the caller keeps `c + 8` within the row; eight f16 are the 16 bytes loaded.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(self.as_ptr().add(c).cast())) }
    }
}

impl Load8 for [BlockQ8_0] {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(&self, c: usize) -> __m256 {
        let block = &self[c / Q8_0_BLOCK];
        let codes = &block.qs[c % Q8_0_BLOCK..c % Q8_0_BLOCK + 8];
        // SAFETY: loads exactly the eight codes of `codes`.
        let codes = unsafe { _mm_loadl_epi64(codes.as_ptr().cast()) };
        let d = _mm256_cvtph_ps(_mm_cvtsi32_si128(i32::from(block.d.to_bits())));
        let d = _mm256_permutevar8x32_ps(d, _mm256_setzero_si256());
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), d)
    }
}

/// The AVX2 attention kernels for rows of element type `X`.
pub(super) fn row_kernels<X: Load8 + ?Sized>() -> RowKernels<X> {
    RowKernels {
        axpy: axpy::<X>,
        axpy4: axpy4::<X>,
        dot4: dot4::<X>,
    }
}

/// AVX2 `y += a * x` (one fused multiply-add per element).
#[target_feature(enable = "avx2,fma,f16c")]
fn axpy<X: Load8 + ?Sized>(a: f32, x: &X, y: &mut [f32]) {
    let full = y.len() / 8 * 8;
    let av = _mm256_set1_ps(a);
    for c in (0..full).step_by(8) {
        // SAFETY: the load and the store touch the eight values at `c` of rows at least `full`
        // long (the caller checked the lengths), `c` a multiple of 8.
        unsafe {
            let v = _mm256_fmadd_ps(av, x.load8(c), _mm256_loadu_ps(y.as_ptr().add(c)));
            _mm256_storeu_ps(y.as_mut_ptr().add(c), v);
        }
    }
    for (e, y) in y.iter_mut().enumerate().skip(full) {
        *y = a.mul_add(x.value(e), *y);
    }
}

/// AVX2 four axpys in one pass: per element the same fused multiply-adds, in the same order, as
/// four [`axpy`] calls.
#[target_feature(enable = "avx2,fma,f16c")]
fn axpy4<X: Load8 + ?Sized>(a: [f32; 4], x: [&X; 4], y: &mut [f32]) {
    let full = y.len() / 8 * 8;
    let av = a.map(|a| _mm256_set1_ps(a));
    for c in (0..full).step_by(8) {
        // SAFETY: every load and the store touch the eight values at `c` of rows at least
        // `full` long (the caller checked the lengths), `c` a multiple of 8.
        unsafe {
            let mut v = _mm256_loadu_ps(y.as_ptr().add(c));
            for (a, x) in av.iter().zip(&x) {
                v = _mm256_fmadd_ps(*a, x.load8(c), v);
            }
            _mm256_storeu_ps(y.as_mut_ptr().add(c), v);
        }
    }
    for (a, x) in a.into_iter().zip(x) {
        for (e, y) in y.iter_mut().enumerate().skip(full) {
            *y = a.mul_add(x.value(e), *y);
        }
    }
}

/// AVX2 [`super::VectorKernels::dot4`]: the query is loaded once for the four keys.
#[target_feature(enable = "avx2,fma,f16c")]
fn dot4<K: Load8 + ?Sized>(q: &[f32], k: [&K; 4]) -> [f32; 4] {
    let full = q.len() / 8 * 8;
    let mut acc = [_mm256_setzero_ps(); 4];
    for c in (0..full).step_by(8) {
        // SAFETY: every load reads the eight values at `c` of rows at least `full` long (the
        // caller checked the lengths), `c` a multiple of 8.
        unsafe {
            let qv = _mm256_loadu_ps(q.as_ptr().add(c));
            for (acc, k) in acc.iter_mut().zip(&k) {
                *acc = _mm256_fmadd_ps(qv, k.load8(c), *acc);
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
        for (e, &q) in q.iter().enumerate().skip(full) {
            *o = q.mul_add(k.value(e), *o);
        }
    }
    out
}
