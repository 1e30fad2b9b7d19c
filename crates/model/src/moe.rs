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

use crate::compute::{self, linear, linear_shared};
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
    selection_bias: Option<&[f32]>,
    n: usize,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let m = &mut s.moe;
    linear(scores, &s.h, n, &mut m.scores, &mut s.products)?;
    let (e, k) = (router.experts, router.used);
    let rows = m.scores[..n * e].chunks_exact_mut(e);
    let ids = m.ids[..n * k].chunks_exact_mut(k);
    let weights = m.weights[..n * k].chunks_exact_mut(k);
    for ((scores, ids), weights) in rows.zip(ids).zip(weights) {
        ops::route(router, scores, selection_bias, ids, weights);
    }
    Ok(())
}

/// `s.moe.shared = g · down(act(gate(h), up(h)))` for the `n` rows of `s.h`, with
/// `g = sigmoid(gate_inp · h)` per row where the layer gates its shared experts, else 1.
pub(crate) fn shared(
    experts: &Experts,
    [gate, up, down]: [&Linear; 3],
    gate_inp: Option<&[f32]>,
    n: usize,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let (f, m) = (experts.ffn_dim, &mut s.moe);
    let outs = [&mut m.shared_gate[..], &mut m.shared_up[..]];
    linear_shared([gate, up], &s.h, n, outs, &mut s.products)?;
    activate(
        experts.ffn,
        &mut m.shared_gate[..n * f],
        &m.shared_up[..n * f],
        f,
    )?;
    linear(down, &m.shared_gate, n, &mut m.shared, &mut s.products)?;
    if let Some(g) = gate_inp {
        let hidden = g.len();
        let rows = m.shared[..n * hidden].chunks_exact_mut(hidden);
        for (out, h) in rows.zip(s.h.chunks_exact(hidden)) {
            let dot: f32 = g.iter().zip(h).map(|(&g, &h)| g * h).sum();
            let gate = 1.0 / (1.0 + (-dot).exp());
            out.iter_mut().for_each(|y| *y *= gate);
        }
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
    if n == 1 && !s.products.observed() && decode_batched(experts, w, hidden, k, s)? {
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
        linear(&w.gate[e], &m.input, rows, &mut m.gate, &mut s.products)?;
        linear(&w.up[e], &m.input, rows, &mut m.up, &mut s.products)?;
        activate(experts.ffn, &mut m.gate[..rows * f], &m.up[..rows * f], f)?;
        linear(&w.down[e], &m.gate, rows, &mut m.output, &mut s.products)?;
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

#[cfg(test)]
mod tests {
    use rinfer_formats::GgmlType;

    use super::*;
    use crate::config::ModelConfig;
    use crate::loaded::LoadedModel;
    use crate::weights::Matrix;

    /// The deepseek2 fixture's configuration, its shared experts gated as Qwen3.5-MoE's are.
    fn gated_config() -> ModelConfig {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/models/deepseek2-tiny-f32.gguf"
        );
        let mut config = LoadedModel::open(path).unwrap().model.config;
        let moe = config.experts.as_mut().unwrap();
        moe.shared.as_mut().unwrap().gated = true;
        config
    }

    /// An f32 linear layer `[rows, cols]` from a fixed sequence.
    fn f32_linear(rows: usize, cols: usize, seed: usize) -> Linear {
        let values = (0..rows * cols).map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) / 40.0);
        let bytes = values.flat_map(f32::to_le_bytes).collect();
        Linear {
            weight: Matrix::from_owned(GgmlType::F32, rows, cols, bytes),
            bias: None,
        }
    }

    #[test]
    fn shared_experts_are_a_swiglu_scaled_by_the_sigmoid_of_their_gate() {
        let config = gated_config();
        let (hidden, n) = (config.hidden, 2);
        let f = config.experts.unwrap().shared.unwrap().ffn_dim;
        let experts = Experts {
            ffn: Ffn::SiluGated,
            ffn_dim: f,
        };
        let (gate, up, down) = (
            f32_linear(f, hidden, 1),
            f32_linear(f, hidden, 2),
            f32_linear(hidden, f, 3),
        );
        let gate_inp: Vec<f32> = (0..hidden).map(|i| (i % 5) as f32 / 10.0 - 0.2).collect();
        let mut s = Scratch::new(&config, n);
        for (i, h) in s.h[..n * hidden].iter_mut().enumerate() {
            *h = ((i * 7) % 13) as f32 / 13.0 - 0.5;
        }
        shared(&experts, [&gate, &up, &down], None, n, &mut s).unwrap();
        let ungated = s.moe.shared[..n * hidden].to_vec();
        shared(&experts, [&gate, &up, &down], Some(&gate_inp), n, &mut s).unwrap();
        let w = |l: &Linear, r: usize, c: usize| {
            let bytes = &l.weight.data()[(r * l.weight.cols + c) * 4..][..4];
            f32::from_le_bytes(bytes.try_into().unwrap()) as f64
        };
        for row in 0..n {
            let h: Vec<f64> = s.h[row * hidden..(row + 1) * hidden]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let dot = |l: &Linear, r: usize, x: &[f64]| -> f64 {
                x.iter().enumerate().map(|(c, &v)| w(l, r, c) * v).sum()
            };
            let act: Vec<f64> = (0..f)
                .map(|j| {
                    let (g, u) = (dot(&gate, j, &h), dot(&up, j, &h));
                    g / (1.0 + (-g).exp()) * u
                })
                .collect();
            let g: f64 = gate_inp.iter().zip(&h).map(|(&g, &h)| g as f64 * h).sum();
            let sigmoid = 1.0 / (1.0 + (-g).exp());
            for c in 0..hidden {
                let want = dot(&down, c, &act);
                let at = row * hidden + c;
                assert!(
                    (ungated[at] as f64 - want).abs() < 1e-5,
                    "row {row} col {c}"
                );
                let gated = s.moe.shared[at] as f64;
                assert!(
                    (gated - sigmoid * want).abs() < 1e-5,
                    "gated row {row} col {c}"
                );
            }
        }
    }
}
