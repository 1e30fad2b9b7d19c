//! The gated delta rule of Qwen3.5's linear-attention layers, one head of one sequence over a
//! run of tokens.
//!
//! A head's state `S` is `dk × dv` (row `i` for key dimension `i`), stored as slices of
//! [`COLUMNS`] columns (the last one narrower when `dv` is not a multiple), each slice row by
//! row: element `(i, j)` of the slice of width `w` that starts at column `c` is at
//! `c·dk + i·w + (j − c)`. Each token brings a key
//! `k`, a value `v`, a query `q`, a decay `d = exp(g)` and a rate `β`:
//! `S = d·S; m = Sᵀk; S += k ⊗ β(v − m); o = Sᵀq`, each sum over `i` upward, products added
//! with fused multiply-adds.
//!
//! Column `j` of `S` evolves on its own (`m_j`, `o_j` and the update of column `j` read only
//! column `j`), so the kernel carries each slice through every token of the run before the
//! next: the slice (`dk × COLUMNS` contiguous floats) stays in the L1 cache, and one pass over it per token does the update and output
//! of that token and the decay and `m` of the next. Every value sees the same operations in
//! the same order as one token at a time, so a sequence fed in one call or in many, on any
//! number of threads and with any instruction set, gives the same bits.

#[cfg(target_arch = "x86_64")]
pub(super) mod x86;

#[cfg(test)]
mod tests;

use super::VectorKernels;

/// The columns of the state one pass carries through a run of tokens.
pub(crate) const COLUMNS: usize = 32;

/// One token's inputs to one head of the delta rule.
#[derive(Clone, Copy, Debug)]
pub struct DeltaToken<'a> {
    /// The query (`dk` values).
    pub q: &'a [f32],
    /// The key (`dk` values).
    pub k: &'a [f32],
    /// The value (`dv` values).
    pub v: &'a [f32],
    /// The decay `d` the state is multiplied by before this token.
    pub decay: f32,
    /// The rate `β` of the update.
    pub beta: f32,
}

/// A run of tokens' inputs to one head, read in place from the mixer's rows (no copy, no
/// allocation): token `t`'s query, key and value are `dk`, `dk` and `dv` values at offsets `q`,
/// `k` and `v` of row `rows[t·stride..]`, its decay and rate `decay[t·gate_stride]` and
/// `beta[t·gate_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct DeltaRun<'a> {
    /// The tokens' rows, `stride` values each.
    pub rows: &'a [f32],
    /// The values of one row.
    pub stride: usize,
    /// Where the query, key and value start in a row.
    pub q: usize,
    /// See [`DeltaRun::q`].
    pub k: usize,
    /// See [`DeltaRun::q`].
    pub v: usize,
    /// Key dimensions.
    pub dk: usize,
    /// Value dimensions.
    pub dv: usize,
    /// The tokens' decays, `gate_stride` apart.
    pub decay: &'a [f32],
    /// The tokens' rates, `gate_stride` apart.
    pub beta: &'a [f32],
    /// The distance between two tokens' decays (and rates).
    pub gate_stride: usize,
}

impl<'a> DeltaRun<'a> {
    /// The number of tokens (0 for a zero stride).
    pub fn len(&self) -> usize {
        self.rows.len().checked_div(self.stride).unwrap_or(0)
    }

    /// Whether the run has no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Token `t`.
    ///
    /// # Panics
    /// If `t` is not below [`DeltaRun::len`] or the offsets leave the row.
    pub fn token(&self, t: usize) -> DeltaToken<'a> {
        let row = &self.rows[t * self.stride..(t + 1) * self.stride];
        DeltaToken {
            q: &row[self.q..self.q + self.dk],
            k: &row[self.k..self.k + self.dk],
            v: &row[self.v..self.v + self.dv],
            decay: self.decay[t * self.gate_stride],
            beta: self.beta[t * self.gate_stride],
        }
    }

    /// Token `t` when there is one.
    fn get(&self, t: usize) -> Option<DeltaToken<'a>> {
        (t < self.len()).then(|| self.token(t))
    }
}

/// Runs the tokens of `run` in order through one head's `state` (`dk × dv`, in column slices
/// as the module says; all zeros is the empty state), writing each token's output (`dv`
/// values) to its row of `out`.
///
/// # Panics
/// If the lengths disagree (a caller bug).
pub fn delta_rule(state: &mut [f32], run: &DeltaRun<'_>, out: &mut [f32]) {
    VectorKernels::detected().delta_rule(state, run, out);
}

/// Checks the shapes (every token once) and returns `(dk, dv)`.
pub(super) fn shape(state: &[f32], run: &DeltaRun<'_>, out: &[f32]) -> (usize, usize) {
    let (dk, dv) = (run.dk, run.dv);
    assert_eq!(state.len(), dk * dv);
    assert_eq!(out.len(), run.len() * dv);
    for t in 0..run.len() {
        run.token(t);
    }
    (dk, dv)
}

/// Scalar reference of [`delta_rule`].
pub(super) fn reference(state: &mut [f32], run: &DeltaRun<'_>, out: &mut [f32]) {
    let (dk, dv) = shape(state, run, out);
    if run.is_empty() {
        return;
    }
    let mut c0 = 0;
    while c0 < dv {
        let width = COLUMNS.min(dv - c0);
        columns(
            &mut state[c0 * dk..(c0 + width) * dk],
            run,
            out,
            dv,
            c0..c0 + width,
        );
        c0 += width;
    }
}

/// The reference on the state columns `cols` (at most [`COLUMNS`]), whose slice is `block`
/// (`dk × cols.len()`, row by row).
pub(super) fn columns(
    block: &mut [f32],
    run: &DeltaRun<'_>,
    out: &mut [f32],
    dv: usize,
    cols: std::ops::Range<usize>,
) {
    let w = cols.len();
    let dk = block.len() / w;
    let mut m = [0.0f32; COLUMNS];
    let first = run.token(0);
    for i in 0..dk {
        let row = &mut block[i * w..(i + 1) * w];
        for (s, m) in row.iter_mut().zip(&mut m) {
            *s *= first.decay;
            *m = s.mul_add(first.k[i], *m);
        }
    }
    for t in 0..run.len() {
        let token = run.token(t);
        let mut delta = [0.0f32; COLUMNS];
        for ((d, &v), &m) in delta.iter_mut().zip(&token.v[cols.clone()]).zip(&m) {
            *d = token.beta * (v - m);
        }
        let mut o = [0.0f32; COLUMNS];
        let next = run.get(t + 1);
        m = [0.0; COLUMNS];
        for i in 0..dk {
            let (ki, qi) = (token.k[i], token.q[i]);
            let row = &mut block[i * w..(i + 1) * w];
            for ((s, &d), o) in row.iter_mut().zip(&delta).zip(&mut o) {
                *s = ki.mul_add(d, *s);
                *o = s.mul_add(qi, *o);
            }
            if let Some(next) = next {
                for (s, m) in row.iter_mut().zip(&mut m) {
                    *s *= next.decay;
                    *m = s.mul_add(next.k[i], *m);
                }
            }
        }
        out[t * dv + cols.start..][..w].copy_from_slice(&o[..w]);
    }
}
