//! The CPU executor of the mixture-of-experts stages: the router picks each row's experts,
//! then every expert that some row picked runs once on all of its rows (one matmul per
//! projection), and each row sums its experts' outputs in the router's order.
//!
//! An expert no row picked is never read, so a decode step touches only the selected experts'
//! weights. A row's result depends only on the row: the products give each row the bits they
//! would give it alone, and the weighted sum runs in slot order, whatever the batch.

use rayon::prelude::*;

use rinfer_kernels::block::{Experts, Ffn, Router};
use rinfer_kernels::ops::{self, Activation, VectorKernels};

use crate::compute::{self, linear};
use crate::error::ModelError;
use crate::scratch::Scratch;
use crate::weights::ExpertWeights;

/// Each of the `n` rows of `s.h` routed: `s.moe.ids` and `s.moe.weights`, `router.used` per row.
pub(crate) fn route(
    router: &Router,
    w: &ExpertWeights,
    n: usize,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let m = &mut s.moe;
    linear(&w.router, &s.h, n, &mut m.scores, &mut s.act)?;
    let (e, k) = (router.experts, router.used);
    let rows = m.scores[..n * e].chunks_exact_mut(e);
    let ids = m.ids[..n * k].chunks_exact_mut(k);
    let weights = m.weights[..n * k].chunks_exact_mut(k);
    for ((scores, ids), weights) in rows.zip(ids).zip(weights) {
        ops::route(router.gating, scores, ids, weights);
    }
    Ok(())
}

/// `s.h = Σ weight · expert(h)` over each row's routed experts (from [`route`]).
pub(crate) fn run(
    experts: &Experts,
    w: &ExpertWeights,
    hidden: usize,
    k: usize,
    n: usize,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let f = experts.ffn_dim;
    let m = &mut s.moe;
    for e in 0..w.gate.len() {
        m.routed.clear();
        for (slot, &id) in m.ids[..n * k].iter().enumerate() {
            if id as usize == e {
                m.routed.push((slot / k, slot));
            }
        }
        let rows = m.routed.len();
        if rows == 0 {
            continue;
        }
        for (r, &(row, _)) in m.routed.iter().enumerate() {
            let src = &s.h[row * hidden..(row + 1) * hidden];
            m.input[r * hidden..(r + 1) * hidden].copy_from_slice(src);
        }
        linear(&w.gate[e], &m.input, rows, &mut m.gate, &mut s.act)?;
        linear(&w.up[e], &m.input, rows, &mut m.up, &mut s.act)?;
        activate(experts.ffn, &mut m.gate[..rows * f], &m.up[..rows * f], f)?;
        linear(&w.down[e], &m.gate, rows, &mut m.output, &mut s.act)?;
        for (r, &(_, slot)) in m.routed.iter().enumerate() {
            let out = &m.output[r * hidden..(r + 1) * hidden];
            m.slots[slot * hidden..(slot + 1) * hidden].copy_from_slice(out);
        }
    }
    let (slots, weights) = (&m.slots, &m.weights);
    s.h[..n * hidden]
        .par_chunks_mut(hidden)
        .enumerate()
        .for_each(|(row, h)| {
            for j in 0..k {
                let slot = row * k + j;
                let y = &slots[slot * hidden..(slot + 1) * hidden];
                let wj = weights[slot];
                if j == 0 {
                    h.iter_mut().zip(y).for_each(|(h, &y)| *h = wj * y);
                } else {
                    h.iter_mut().zip(y).for_each(|(h, &y)| *h += wj * y);
                }
            }
        });
    Ok(())
}

/// The expert's activation on rows of `f` values: `gate = act(gate, up)`.
fn activate(ffn: Ffn, gate: &mut [f32], up: &[f32], f: usize) -> Result<(), ModelError> {
    let gated = |act: Activation, gate: &mut [f32]| {
        let vector = VectorKernels::detected();
        gate.par_chunks_mut(f)
            .zip(up.par_chunks(f))
            .for_each(|(g, u)| vector.gated_inplace(act, g, u));
    };
    match ffn {
        Ffn::SiluGated => gated(Activation::Silu, gate),
        Ffn::GeluGated => gated(compute::GELU, gate),
        Ffn::ClampedSwiGlu => ops::swiglu_clamped_inplace(gate, up),
        Ffn::Gelu => {
            return Err(ModelError::InvalidConfig(
                "experts must be gated feed-forward blocks".into(),
            ));
        }
    }
    Ok(())
}
