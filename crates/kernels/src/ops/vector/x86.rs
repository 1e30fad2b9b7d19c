//! AVX2+FMA vector kernels; eight lanes at a time, the tail through the scalar references or
//! in their order.

use std::arch::x86_64::*;

use half::f16;

/// `e^x` for eight lanes (Cephes' polynomial after reduction by ln 2; within a few ulp of
/// `f32::exp`, inputs clamped to `±88.376`).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let max = super::EXP_INPUT_MAX;
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-max)), _mm256_set1_ps(max));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let [ln2_hi, ln2_lo] = super::EXP_LN2;
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ln2_hi), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ln2_lo), r);
    let [first, rest @ ..] = super::EXP_POLY;
    let mut p = _mm256_set1_ps(first);
    for c in rest {
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

elementwise_kernels!(
    "avx2,fma", __m256, 8 lanes,
    load: _mm256_loadu_ps, store: _mm256_storeu_ps, splat: _mm256_set1_ps,
    add: _mm256_add_ps, sub: _mm256_sub_ps, mul: _mm256_mul_ps, div: _mm256_div_ps, exp: exp8,
    neg: |z| _mm256_sub_ps(_mm256_setzero_ps(), z), mul_add: |a, b, c| _mm256_fmadd_ps(a, b, c),
);

/// Keys one pass of [`scaled_dots`] scores (the query is loaded once for them).
const KEYS: usize = 8;

/// AVX2 [`super::VectorKernels::scaled_dots`]: eight keys per pass; a short last pass repeats
/// its last key, whose sum is its own (and leaves the maximum as it is).
#[target_feature(enable = "avx2,fma")]
pub(super) fn scaled_dots(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) -> f32 {
    let full = q.len() / 8 * 8;
    let scale = _mm256_set1_ps(scale);
    let mut max = _mm256_set1_ps(f32::NEG_INFINITY);
    for (pass, out) in out.chunks_mut(KEYS).enumerate() {
        let k = pass_keys(keys, q.len(), pass, out.len());
        let mut acc = [_mm256_setzero_ps(); KEYS];
        for c in (0..full).step_by(8) {
            // SAFETY: every load reads the eight values at `c` of rows `hd` long, `c + 8 <= hd`.
            unsafe {
                let qv = _mm256_loadu_ps(q.as_ptr().add(c));
                for d in 0..KEYS {
                    acc[d] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[d].add(c)), acc[d]);
                }
            }
        }
        max = finish_pass(&acc, q, &k, scale, max, out);
    }
    max_lane(max)
}

/// AVX-512 [`super::VectorKernels::scaled_dots_pair`] (`H = 2`) and
/// [`super::VectorKernels::scaled_dots_quad`] (`H = 4`): [`scaled_dots`] for `H` queries at
/// once, two per register, lanes 0-7 of a register the first query's, 8-15 the second's,
/// against a key's eight values in both halves (loaded once for all the registers), so each
/// lane does the fused multiply-adds it does there.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn scaled_dots_heads_avx512<const H: usize>(
    q: [&[f32]; H],
    keys: &[f32],
    scale: f32,
    out: [&mut [f32]; H],
) -> [f32; H] {
    let regs = H / 2;
    let hd = q[0].len();
    assert!(H.is_multiple_of(2) && H <= 4 && q.iter().all(|q| q.len() == hd));
    let full = hd / 8 * 8;
    let (scale, mut max) = (
        _mm256_set1_ps(scale),
        [_mm256_set1_ps(f32::NEG_INFINITY); H],
    );
    let n = out[0].len();
    for pass in 0..n.div_ceil(KEYS) {
        let keys_here = KEYS.min(n - pass * KEYS);
        let k = pass_keys(keys, hd, pass, keys_here);
        // SAFETY: every load reads the eight values at `c` of rows `hd` long, with `c + 8 <= hd`.
        let acc = unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; KEYS];
            for c in (0..full).step_by(8) {
                let mut qv = [_mm512_setzero_ps(); 2];
                for (r, qv) in qv.iter_mut().enumerate().take(regs) {
                    let lo = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(
                        q[2 * r].as_ptr().add(c),
                    )));
                    let hi = _mm256_castps_pd(_mm256_loadu_ps(q[2 * r + 1].as_ptr().add(c)));
                    *qv = _mm512_castpd_ps(_mm512_insertf64x4::<1>(lo, hi));
                }
                for d in 0..KEYS {
                    let kv = _mm256_castps_pd(_mm256_loadu_ps(k[d].add(c)));
                    let kv = _mm512_castpd_ps(_mm512_broadcast_f64x4(kv));
                    for r in 0..regs {
                        acc[d][r] = _mm512_fmadd_ps(qv[r], kv, acc[d][r]);
                    }
                }
            }
            acc
        };
        for h in 0..H {
            // Query `h`'s half of each key's register.
            let half: [__m256; KEYS] = std::array::from_fn(|d| {
                let acc = _mm512_castps_pd(acc[d][h / 2]);
                match h % 2 {
                    0 => _mm256_castpd_ps(_mm512_castpd512_pd256(acc)),
                    _ => _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(acc)),
                }
            });
            let out = &mut out[h][pass * KEYS..pass * KEYS + keys_here];
            max[h] = finish_pass(&half, q[h], &k, scale, max[h], out);
        }
    }
    max.map(|m| max_lane(m))
}

/// The rows of pass `pass` of a `scaled_dots` call, with `n` rows in the pass: `KEYS` of them,
/// the last repeated where fewer are left.
#[inline(always)]
fn pass_keys(keys: &[f32], hd: usize, pass: usize, n: usize) -> [*const f32; KEYS] {
    let mut k = [keys.as_ptr(); KEYS];
    for (d, k) in k.iter_mut().enumerate() {
        let row = KEYS * pass + d.min(n - 1);
        *k = keys[row * hd..(row + 1) * hd].as_ptr();
    }
    k
}

/// The end of a pass of `scaled_dots`: each key's lanes summed in the fixed order, its
/// `len % 8` last products added in order, scaled, stored into `out` (its first `out.len()`
/// keys) and taken into the running maximum `max`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn finish_pass(
    acc: &[__m256; KEYS],
    q: &[f32],
    k: &[*const f32; KEYS],
    scale: __m256,
    max: __m256,
    out: &mut [f32],
) -> __m256 {
    let (hd, full) = (q.len(), q.len() / 8 * 8);
    let mut sums = _mm256_set_m128(lane_sums(&acc[4..]), lane_sums(&acc[..4]));
    if full < hd {
        let mut tail = [0.0f32; KEYS];
        // SAFETY: writes exactly the eight floats of `tail`.
        unsafe { _mm256_storeu_ps(tail.as_mut_ptr(), sums) };
        for (d, sum) in tail.iter_mut().enumerate() {
            for (e, &q) in q.iter().enumerate().skip(full) {
                // SAFETY: `e < hd`, within the row `k[d]` points to.
                *sum = q.mul_add(unsafe { *k[d].add(e) }, *sum);
            }
        }
        // SAFETY: reads exactly the eight floats of `tail`.
        sums = unsafe { _mm256_loadu_ps(tail.as_ptr()) };
    }
    let scores = _mm256_mul_ps(sums, scale);
    if out.len() == KEYS {
        // SAFETY: writes exactly the eight floats of `out`.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), scores) };
    } else {
        let mut all = [0.0f32; KEYS];
        // SAFETY: writes exactly the eight floats of `all`.
        unsafe { _mm256_storeu_ps(all.as_mut_ptr(), scores) };
        out.copy_from_slice(&all[..out.len()]);
    }
    _mm256_max_ps(max, scores)
}

/// The largest of eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn max_lane(max: __m256) -> f32 {
    let max = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps::<1>(max));
    let max = _mm_max_ps(max, _mm_movehl_ps(max, max));
    _mm_cvtss_f32(_mm_max_ss(max, _mm_shuffle_ps::<1>(max, max)))
}

/// The lane sums of four accumulators: per accumulator, lanes (0+1, 2+3, 4+5, 6+7), then
/// (01+23, 45+67), then the two halves.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn lane_sums(acc: &[__m256]) -> __m128 {
    let h = _mm256_hadd_ps(
        _mm256_hadd_ps(acc[0], acc[1]),
        _mm256_hadd_ps(acc[2], acc[3]),
    );
    _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h))
}

/// AVX2 [`super::VectorKernels::axpy_rows`]: [`axpy_rows_in`] eight lanes at a time.
#[target_feature(enable = "avx2,fma")]
pub(super) fn axpy_rows(w: &[f32], rows: &[f32], y: &mut [f32]) {
    axpy_rows_in::<__m256, 1>([w], rows, [y]);
}

/// AVX-512 [`super::VectorKernels::axpy_rows`]: [`axpy_rows_in`] sixteen lanes at a time.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn axpy_rows_avx512(w: &[f32], rows: &[f32], y: &mut [f32]) {
    axpy_rows_in::<__m512, 1>([w], rows, [y]);
}

/// AVX-512 [`super::VectorKernels::axpy_rows_pair`]: [`axpy_rows_in`] for both outputs at
/// once, each row loaded once for the two of them.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn axpy_rows_pair_avx512(w: [&[f32]; 2], rows: &[f32], y: [&mut [f32]; 2]) {
    axpy_rows_in::<__m512, 2>(w, rows, y);
}

/// AVX2 (F16C) [`super::VectorKernels::f16_to_f32`]: [`f16_to_f32_in`] eight values per
/// instruction.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn f16_to_f32(src: &[f16], out: &mut [f32]) {
    f16_to_f32_in::<__m256>(src, out, super::f16_to_f32_reference);
}

/// AVX-512 [`super::VectorKernels::f16_to_f32`]: [`f16_to_f32_in`] sixteen values per
/// instruction, the rest through [`f16_to_f32`].
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
pub(super) fn f16_to_f32_avx512(src: &[f16], out: &mut [f32]) {
    f16_to_f32_in::<__m512>(src, out, |src, out| f16_to_f32(src, out));
}

/// [`super::VectorKernels::f16_to_f32`] in registers `V`, converting whole registers of values
/// and handing the last `len % V::WIDTH` to `tail`.
///
/// Inlined into callers that have `V`'s instruction set and F16C.
#[inline(always)]
fn f16_to_f32_in<V: Lanes>(src: &[f16], out: &mut [f32], tail: impl FnOnce(&[f16], &mut [f32])) {
    let mut chunks = src.chunks_exact(V::WIDTH);
    let mut outs = out.chunks_exact_mut(V::WIDTH);
    for (c, o) in (&mut chunks).zip(&mut outs) {
        // SAFETY: the load reads the `WIDTH` f16 of `c`, the store writes the `WIDTH` f32 of `o`;
        // the callers run only where the CPU has `V`'s instruction set and F16C.
        unsafe { V::load_f16(c.as_ptr()).store(o.as_mut_ptr()) }
    }
    tail(chunks.remainder(), outs.into_remainder());
}

/// A register of f32 lanes, so that [`axpy_rows_in`] and [`f16_to_f32_in`] are written once
/// for both widths.
trait Lanes: Copy {
    /// Lanes per register.
    const WIDTH: usize;

    /// # Safety
    /// The CPU must have the register's instruction set, and `WIDTH` values from `p` must be
    /// readable.
    unsafe fn load(p: *const f32) -> Self;

    /// # Safety
    /// The CPU must have the register's instruction set, and `WIDTH` values from `p` must be
    /// writable.
    unsafe fn store(self, p: *mut f32);

    /// `a` in every lane, then `a * x + self` fused, lane by lane.
    ///
    /// # Safety
    /// The CPU must have the register's instruction set.
    unsafe fn fma(self, a: f32, x: Self) -> Self;

    /// The `WIDTH` f16 values from `p`, converted (exactly).
    ///
    /// # Safety
    /// The CPU must have the register's instruction set and F16C, and `WIDTH` values from `p`
    /// must be readable.
    unsafe fn load_f16(p: *const f16) -> Self;
}

/// Implements [`Lanes`] for the register `$reg` of `$width` lanes on the instruction set
/// `$features` (`$f16_features` with F16C), through its unaligned load and store, its broadcast
/// and its fused multiply-add, and for f16 values the unaligned integer load of their bits and
/// the conversion (in that order).
macro_rules! lanes {
    (
        $reg:ty, $width:literal lanes with $features:literal ($f16_features:literal with F16C):
        $load:ident, $store:ident, $set1:ident, $fmadd:ident;
        f16: $load_bits:ident, $convert:ident
    ) => {
        impl Lanes for $reg {
            const WIDTH: usize = $width;

            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn load(p: *const f32) -> Self {
                // SAFETY: the caller keeps the `WIDTH` values readable.
                unsafe { $load(p) }
            }

            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn store(self, p: *mut f32) {
                // SAFETY: the caller keeps the `WIDTH` values writable.
                unsafe { $store(p, self) }
            }

            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn fma(self, a: f32, x: Self) -> Self {
                $fmadd($set1(a), x, self)
            }

            #[inline]
            #[target_feature(enable = $f16_features)]
            unsafe fn load_f16(p: *const f16) -> Self {
                // SAFETY: the caller keeps the `WIDTH` values readable.
                unsafe { $convert($load_bits(p.cast())) }
            }
        }
    };
}

lanes! {
    __m256, 8 lanes with "avx2,fma" ("avx2,fma,f16c" with F16C):
    _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps;
    f16: _mm_loadu_si128, _mm256_cvtph_ps
}
lanes! {
    __m512, 16 lanes with "avx512f,avx2,fma" ("avx512f,avx2,fma,f16c" with F16C):
    _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps;
    f16: _mm256_loadu_si256, _mm512_cvtph_ps
}

/// [`super::VectorKernels::axpy_rows`] in registers `V` for `M` weight vectors over the same
/// rows, each into its own output: spans of up to eight registers across the outputs stay in
/// registers while every row is loaded once and added to all of them (independent
/// accumulators keep the fused multiply-adds busy), so the fused multiply-adds of one element
/// run in row order, as in the reference; the values past the last whole register in that
/// order too.
///
/// Inlined into callers that have `V`'s instruction set.
#[inline(always)]
fn axpy_rows_in<V: Lanes, const M: usize>(w: [&[f32]; M], rows: &[f32], y: [&mut [f32]; M]) {
    let mut y = y;
    let (hd, lanes) = (y[0].len(), V::WIDTH);
    let full = hd / lanes * lanes;
    let mut c = 0;
    for span in [8, 4, 2, 1].into_iter().filter(|span| span * M <= 8) {
        while c + span * lanes <= full {
            match span {
                8 => axpy_span::<V, 8, M>(w, rows, &mut y, c),
                4 => axpy_span::<V, 4, M>(w, rows, &mut y, c),
                2 => axpy_span::<V, 2, M>(w, rows, &mut y, c),
                _ => axpy_span::<V, 1, M>(w, rows, &mut y, c),
            }
            c += span * lanes;
        }
    }
    for (w, y) in w.into_iter().zip(y) {
        for e in full..hd {
            for (j, &a) in w.iter().enumerate() {
                y[e] = a.mul_add(rows[j * hd + e], y[e]);
            }
        }
    }
}

/// [`axpy_rows_in`] on the `N` registers of each of the `M` outputs from `c`.
#[inline(always)]
fn axpy_span<V: Lanes, const N: usize, const M: usize>(
    w: [&[f32]; M],
    rows: &[f32],
    y: &mut [&mut [f32]; M],
    c: usize,
) {
    let (hd, lanes) = (y[0].len(), V::WIDTH);
    let n = w[0].len();
    assert!(c + lanes * N <= hd && rows.len() >= n * hd);
    assert!(w.iter().all(|w| w.len() == n) && y.iter().all(|y| y.len() == hd));
    // SAFETY: every load and store touches values `c..c + lanes * N` of an output or of a row
    // of `rows`, within bounds by the assertions; the callers run only where the CPU has
    // `V`'s instruction set.
    unsafe {
        // `v[i][m]`: register `i` of the span in output `m`.
        let mut v: [[V; M]; N] = std::array::from_fn(|i| {
            std::array::from_fn(|m| V::load(y[m].as_ptr().add(c + lanes * i)))
        });
        for j in 0..n {
            let x = rows.as_ptr().add(j * hd + c);
            for (i, v) in v.iter_mut().enumerate() {
                let row = V::load(x.add(lanes * i));
                for (v, w) in v.iter_mut().zip(&w) {
                    *v = v.fma(w[j], row);
                }
            }
        }
        for (i, v) in v.into_iter().enumerate() {
            for (m, v) in v.into_iter().enumerate() {
                v.store(y[m].as_mut_ptr().add(c + lanes * i));
            }
        }
    }
}
