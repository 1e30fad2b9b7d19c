//! AVX-512 delta rule: a slice of [`COLUMNS`] state columns in two registers per key
//! dimension, carried through every token of the run; the last `dv % COLUMNS` columns through
//! the reference.

use std::arch::x86_64::*;

use super::{COLUMNS, DeltaRun, columns, shape};

/// [`super::delta_rule`] with AVX-512F.
#[target_feature(enable = "avx512f")]
pub(in crate::ops) fn delta_rule_avx512(state: &mut [f32], run: &DeltaRun<'_>, out: &mut [f32]) {
    let (dk, dv) = shape(state, run, out);
    if run.is_empty() {
        return;
    }
    let full = dv / COLUMNS * COLUMNS;
    for c0 in (0..full).step_by(COLUMNS) {
        slice(&mut state[c0 * dk..(c0 + COLUMNS) * dk], run, out, dv, c0);
    }
    if full < dv {
        columns(&mut state[full * dk..], run, out, dv, full..dv);
    }
}

/// The columns `c0..c0 + 32`, whose slice is `block` (`dk × 32`), through every token.
#[inline]
#[target_feature(enable = "avx512f")]
fn slice(block: &mut [f32], run: &DeltaRun<'_>, out: &mut [f32], dv: usize, c0: usize) {
    let dk = block.len() / COLUMNS;
    assert!(c0 + COLUMNS <= dv && block.len() == dk * COLUMNS);
    let base = block.as_mut_ptr();
    let first = run.token(0);
    let mut m = [_mm512_setzero_ps(); 2];
    let decay = _mm512_set1_ps(first.decay);
    for i in 0..dk {
        // SAFETY: row `i` of the slice (32 floats) lies inside `block` (asserted above).
        unsafe {
            let p = base.add(i * COLUMNS);
            let ki = _mm512_set1_ps(first.k[i]);
            for (h, m) in m.iter_mut().enumerate() {
                let s = _mm512_mul_ps(_mm512_loadu_ps(p.add(16 * h)), decay);
                *m = _mm512_fmadd_ps(s, ki, *m);
                _mm512_storeu_ps(p.add(16 * h), s);
            }
        }
    }
    for t in 0..run.len() {
        let token = run.token(t);
        let v = &token.v[c0..c0 + COLUMNS];
        let beta = _mm512_set1_ps(token.beta);
        // SAFETY: `v` holds 32 values.
        let delta = unsafe {
            [0, 1].map(|h| {
                _mm512_mul_ps(
                    beta,
                    _mm512_sub_ps(_mm512_loadu_ps(v.as_ptr().add(16 * h)), m[h]),
                )
            })
        };
        let mut o = [_mm512_setzero_ps(); 2];
        m = [_mm512_setzero_ps(); 2];
        match run.get(t + 1) {
            Some(next) => {
                let decay = _mm512_set1_ps(next.decay);
                for i in 0..dk {
                    let (ki, qi) = (_mm512_set1_ps(token.k[i]), _mm512_set1_ps(token.q[i]));
                    let kn = _mm512_set1_ps(next.k[i]);
                    // SAFETY: as above.
                    unsafe {
                        let p = base.add(i * COLUMNS);
                        for h in 0..2 {
                            let s = _mm512_fmadd_ps(ki, delta[h], _mm512_loadu_ps(p.add(16 * h)));
                            o[h] = _mm512_fmadd_ps(s, qi, o[h]);
                            let s = _mm512_mul_ps(s, decay);
                            m[h] = _mm512_fmadd_ps(s, kn, m[h]);
                            _mm512_storeu_ps(p.add(16 * h), s);
                        }
                    }
                }
            }
            None => {
                for i in 0..dk {
                    let (ki, qi) = (_mm512_set1_ps(token.k[i]), _mm512_set1_ps(token.q[i]));
                    // SAFETY: as above.
                    unsafe {
                        let p = base.add(i * COLUMNS);
                        for h in 0..2 {
                            let s = _mm512_fmadd_ps(ki, delta[h], _mm512_loadu_ps(p.add(16 * h)));
                            o[h] = _mm512_fmadd_ps(s, qi, o[h]);
                            _mm512_storeu_ps(p.add(16 * h), s);
                        }
                    }
                }
            }
        }
        let dst = &mut out[t * dv + c0..t * dv + c0 + COLUMNS];
        // SAFETY: `dst` holds 32 values.
        unsafe {
            _mm512_storeu_ps(dst.as_mut_ptr(), o[0]);
            _mm512_storeu_ps(dst.as_mut_ptr().add(16), o[1]);
        }
    }
}
