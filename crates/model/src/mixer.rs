//! The CPU arms of the recurrent mixers of hybrid models ([`Stage::ShortConv`] and
//! [`Stage::DeltaNet`]): the projections of all rows at once, then each sequence's rows in
//! position order through the recurrence that continues its cached state (the kernels in
//! `rinfer_kernels::ops`, whose module docs give the arithmetic). A sequence's rows are
//! contiguous in the batch, so its state sees them in order whatever runs beside it, and the
//! result does not depend on how its tokens were split into passes.
//!
//! [`Stage::ShortConv`]: rinfer_transformer::Stage::ShortConv
//! [`Stage::DeltaNet`]: rinfer_transformer::Stage::DeltaNet

use std::ops::Range;

use rayon::prelude::*;

use rinfer_kernels::ops::{self, Activation};
use rinfer_transformer::{DeltaNet, DeltaNetWeights, ShortConv};

use crate::compute::{linear, linear_shared};
use crate::error::ModelError;
use crate::forward::SeqBatch;
use crate::kv_cache::RecurrentState;
use crate::scratch::{RowSource, Scratch};
use crate::weights::{Cpu, Linear};

/// The runs of consecutive rows of one sequence: `(sequence, rows)`.
fn runs(sources: &[RowSource]) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        let first = sources.get(start)?;
        let len = sources[start..]
            .iter()
            .take_while(|s| s.seq == first.seq)
            .count();
        let run = (first.seq, start..start + len);
        start += len;
        Some(run)
    })
}

/// The state of `layer` in `seq`'s cache.
fn state<'c>(seqs: &'c mut [SeqBatch<'_>], seq: usize, layer: usize) -> &'c mut RecurrentState {
    seqs[seq]
        .cache
        .recurrent_state(layer)
        .expect("a recurrent layer's cache keeps a recurrent state")
}

/// LFM2's short convolution of the `n` rows of `s.h` into `s.out`.
pub(crate) fn short_conv(
    layer: usize,
    conv: &ShortConv,
    (in_proj, kernel, out_proj): (&Linear, &[f32], &Linear),
    n: usize,
    seqs: &mut [SeqBatch<'_>],
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let e = conv.channels;
    let m = &mut s.mixer;
    linear(in_proj, &s.h, n, &mut m.proj, &mut s.products)?;
    for (row, input) in m.proj[..n * 3 * e]
        .chunks_exact(3 * e)
        .zip(m.conv[..n * e].chunks_exact_mut(e))
    {
        let (b, u) = (&row[..e], &row[2 * e..]);
        for ((x, &b), &u) in input.iter_mut().zip(b).zip(u) {
            *x = b * u;
        }
    }
    for (seq, rows) in runs(&s.sources) {
        let window = &mut state(seqs, seq, layer).window;
        let span = rows.start * e..rows.end * e;
        let (x, y) = (&m.conv[span.clone()], &mut m.mixed[span]);
        ops::causal_conv(kernel, conv.taps, e, window, x, y);
    }
    for (row, y) in m.proj[..n * 3 * e]
        .chunks_exact(3 * e)
        .zip(m.mixed[..n * e].chunks_exact_mut(e))
    {
        for (y, &c) in y.iter_mut().zip(&row[e..2 * e]) {
            *y *= c;
        }
    }
    linear(out_proj, &m.mixed, n, &mut s.out, &mut s.products)
}

/// Qwen3.5's gated delta net of the `n` rows of `s.h` into `s.out`.
pub(crate) fn delta_net(
    layer: usize,
    net: &DeltaNet,
    w: &DeltaNetWeights<Cpu>,
    n: usize,
    seqs: &mut [SeqBatch<'_>],
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let (conv_dim, qk_dim, v_dim) = (net.conv_dim(), net.qk_dim(), net.v_dim());
    let (hv, hk, d) = (net.v_heads, net.k_heads, net.state);
    let m = &mut s.mixer;
    let outs = [
        &mut m.proj[..],
        &mut m.gate[..],
        &mut m.beta[..],
        &mut m.decay[..],
    ];
    linear_shared(
        [&w.qkv, &w.gate, &w.beta, &w.alpha],
        &s.h,
        n,
        outs,
        &mut s.products,
    )?;
    for (seq, rows) in runs(&s.sources) {
        let window = &mut state(seqs, seq, layer).window;
        let span = rows.start * conv_dim..rows.end * conv_dim;
        let (x, y) = (&m.proj[span.clone()], &mut m.conv[span]);
        ops::causal_conv(&w.kernel, net.taps, conv_dim, window, x, y);
    }
    let scale = 1.0 / (d as f32).sqrt();
    let vector = rinfer_kernels::Kernels::detected().vector();
    for row in m.conv[..n * conv_dim].chunks_exact_mut(conv_dim) {
        vector.activate_inplace(Activation::Silu, row);
        let (q, k) = row[..2 * qk_dim].split_at_mut(qk_dim);
        for head in q.chunks_exact_mut(d) {
            ops::l2_norm_inplace(head, net.eps);
            ops::scale(head, scale);
        }
        for head in k.chunks_exact_mut(d) {
            ops::l2_norm_inplace(head, net.eps);
        }
    }
    for (beta, decay) in m.beta[..n * hv]
        .chunks_exact_mut(hv)
        .zip(m.decay[..n * hv].chunks_exact_mut(hv))
    {
        for (b, (g, (&dt, &a))) in beta
            .iter_mut()
            .zip(decay.iter_mut().zip(w.dt_bias.iter().zip(&w.a)))
        {
            *b = ops::sigmoid(*b);
            *g = (ops::softplus(*g + dt) * a).exp();
        }
    }
    let (conv, beta, decay) = (&m.conv, &m.beta, &m.decay);
    for (seq, rows) in runs(&s.sources) {
        let matrices = &mut state(seqs, seq, layer).matrices;
        matrices
            .par_chunks_mut(d * d)
            .zip(m.heads[..n * v_dim].par_chunks_mut(n * d))
            .enumerate()
            .for_each(|(j, (state, out))| {
                let (qo, ko, vo) = ((j % hk) * d, qk_dim + (j % hk) * d, 2 * qk_dim + j * d);
                let run = ops::DeltaRun {
                    rows: &conv[rows.start * conv_dim..rows.end * conv_dim],
                    stride: conv_dim,
                    q: qo,
                    k: ko,
                    v: vo,
                    dk: d,
                    dv: d,
                    decay: &decay[rows.start * hv + j..],
                    beta: &beta[rows.start * hv + j..],
                    gate_stride: hv,
                };
                ops::delta_rule(state, &run, &mut out[rows.start * d..rows.end * d]);
            });
    }
    for (t, (row, z)) in m.output[..n * v_dim]
        .chunks_exact_mut(v_dim)
        .zip(m.gate[..n * v_dim].chunks_exact_mut(v_dim))
        .enumerate()
    {
        for (j, (head, z)) in row
            .chunks_exact_mut(d)
            .zip(z.chunks_exact_mut(d))
            .enumerate()
        {
            head.copy_from_slice(&m.heads[(j * n + t) * d..(j * n + t + 1) * d]);
            ops::rms_norm_inplace(head, &w.norm, net.eps);
            vector.gated_inplace(Activation::Silu, z, head);
            head.copy_from_slice(z);
        }
    }
    linear(&w.output, &m.output, n, &mut s.out, &mut s.products)
}
