//! The CPU executor of the mixture-of-experts stages: the router picks each row's experts,
//! then every expert that some row picked runs once on all of its rows (one matmul per
//! projection), and each row sums its experts' outputs in the router's order.
//!
//! A decode step (one row) runs its experts' gate and up products in one parallel region and
//! their down products in another ([`rinfer_kernels::matvec_packed_batch`]): each expert's
//! matrices are small, and a parallel region per product costs more than it shares out.
//!
//! An expert no row picked is never read, so a decode step touches only the selected experts'
//! weights. A row's result depends only on the row: the products give each row the bits they
//! would give it alone, and the weighted sum runs in slot order, whatever the batch.

use rayon::prelude::*;
use rinfer_formats::GgmlType;

use rinfer_kernels::ops::{self, Activation};
use rinfer_kernels::{RowsProduct, matvec_packed_batch};
use rinfer_transformer::{Experts, Ffn, Router};

use crate::compute::{self, linear};
use crate::error::ModelError;
use crate::scratch::Scratch;
use crate::weights::Linear;

/// One layer's experts: per expert its gate, up and down projections.
struct ExpertWeights<'w> {
    gate: &'w [Linear],
    up: &'w [Linear],
    down: &'w [Linear],
}

/// Each of the `n` rows of `s.h` routed: `s.moe.ids` and `s.moe.weights`, `router.used` per row.
pub(crate) fn route(
    router: &Router,
    scores: &Linear,
    n: usize,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let m = &mut s.moe;
    linear(scores, &s.h, n, &mut m.scores, &mut s.act)?;
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
    [gate, up, down]: [&[Linear]; 3],
    hidden: usize,
    k: usize,
    n: usize,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let f = experts.ffn_dim;
    let w = &ExpertWeights { gate, up, down };
    if n == 1 && decode_batched(experts, w, hidden, k, s)? {
        sum_slots(hidden, k, n, s);
        return Ok(());
    }
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
    sum_slots(hidden, k, n, s);
    Ok(())
}

/// `s.h = Σ weight · slot` over each row's `k` slots, in slot order.
fn sum_slots(hidden: usize, k: usize, n: usize, s: &mut Scratch) {
    let (slots, weights) = (&s.moe.slots, &s.moe.weights);
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
}

/// The most experts per token whose products a decode step batches.
const MOST_BATCHED: usize = 16;

/// One token's `k` experts (from [`route`]) into `s.moe.slots`, with all gate and up products
/// in one parallel region and all down products in another; `false` (and nothing done) where
/// the experts' matrices cannot be batched (not packed, of different types, or rows that are
/// not whole packed row groups). Each output has the bits the per-expert products give it.
fn decode_batched(
    experts: &Experts,
    w: &ExpertWeights<'_>,
    hidden: usize,
    k: usize,
    s: &mut Scratch,
) -> Result<bool, ModelError> {
    let f = experts.ffn_dim;
    let m = &mut s.moe;
    let ids = &m.ids[..k];
    let expert = |layer, j: usize| expert_product(layer, ids[j], j);
    let (Some((gate_ty, first)), Some((up_ty, _))) = (expert(w.gate, 0), expert(w.up, 0)) else {
        return Ok(false);
    };
    let groups =
        |p: &RowsProduct<'_>| p.matrix.splits_at(p.rows.start) && p.matrix.splits_at(p.rows.end);
    if k == 0 || k > MOST_BATCHED || gate_ty != up_ty || !groups(&first) {
        return Ok(false);
    }
    let mut gate_up: [RowsProduct<'_>; 2 * MOST_BATCHED] = std::array::from_fn(|_| first.clone());
    let mut down: [RowsProduct<'_>; MOST_BATCHED] = std::array::from_fn(|_| first.clone());
    let down_ty = w.down.get(ids[0] as usize).map(|l| l.weight.ty);
    for j in 0..k {
        let found = (expert(w.gate, j), expert(w.up, j), expert(w.down, j));
        let (Some((gt, g)), Some((ut, u)), Some((dt, d))) = found else {
            return Ok(false);
        };
        let same_types = gt == gate_ty && ut == gate_ty && Some(dt) == down_ty;
        if !(same_types && groups(&g) && groups(&u) && groups(&d)) {
            return Ok(false);
        }
        gate_up[j] = RowsProduct { input: 0, ..g };
        gate_up[k + j] = RowsProduct { input: 0, ..u };
        down[j] = d;
    }
    let (buf, act) = (&mut m.gate_up[..2 * k * f], &mut m.act);
    matvec_packed_batch(&gate_up[..2 * k], &s.h[..hidden], 1, act, buf)?;
    let (gates, ups) = buf.split_at_mut(k * f);
    for j in 0..k {
        let id = ids[j] as usize;
        add_bias(&w.gate[id], &mut gates[j * f..(j + 1) * f]);
        add_bias(&w.up[id], &mut ups[j * f..(j + 1) * f]);
    }
    activate(experts.ffn, gates, ups, f)?;
    let slots = &mut m.slots[..k * hidden];
    matvec_packed_batch(&down[..k], gates, k, act, slots)?;
    for j in 0..k {
        add_bias(
            &w.down[ids[j] as usize],
            &mut slots[j * hidden..(j + 1) * hidden],
        );
    }
    Ok(true)
}

/// Expert `id`'s packed rows of `layer` multiplying input `input`, with their type.
fn expert_product(layer: &[Linear], id: u32, input: usize) -> Option<(GgmlType, RowsProduct<'_>)> {
    let matrix = &layer.get(id as usize)?.weight;
    let (packed, rows) = matrix.packed()?;
    let product = RowsProduct {
        matrix: packed,
        rows,
        input,
    };
    Some((matrix.ty, product))
}

/// `y += b` where the expert projection has a bias.
fn add_bias(l: &Linear, y: &mut [f32]) {
    if let Some(bias) = &l.bias {
        ops::add_inplace(y, bias);
    }
}

/// The expert's activation on rows of `f` values: `gate = act(gate, up)`.
fn activate(ffn: Ffn, gate: &mut [f32], up: &[f32], f: usize) -> Result<(), ModelError> {
    let gated = |act: Activation, gate: &mut [f32]| {
        let vector = rinfer_kernels::Kernels::detected().vector();
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
