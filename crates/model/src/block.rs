//! The CPU executor of a decoder block: walks the layer's [`Stage`]s, each with its weights,
//! over the scratch buffers.

use rayon::prelude::*;

use rinfer_kernels::ops::RopeParams;
use rinfer_kernels::ops::{self, Activation, AttentionParams, AttentionShape};
use rinfer_transformer::{Ffn, FfnUp, Heads, Qkv, Stage};

use crate::compute::{self, linear, linear_shared};
use crate::error::ModelError;
use crate::forward::{Model, SeqBatch};
use crate::mixer;
use crate::moe;
use crate::rows;
use crate::scratch::RowSource;
use crate::scratch::Scratch;
use crate::weights::{Cpu, Linear};

impl Model {
    /// Runs layer `layer` on the `n` rows of the batch: `s.x` in, `s.x` out.
    pub(crate) fn block(
        &self,
        layer: usize,
        n: usize,
        seqs: &mut [SeqBatch<'_>],
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let block = &self.transformer().blocks[layer];
        let heads = &block.heads;
        let hidden = self.transformer().hidden;
        let len = n * hidden;
        let add_rows = |x: &mut [f32], y: &[f32]| rows::each_with(x, y, hidden, ops::add_inplace);
        for stage in &block.stages {
            match stage {
                Stage::AttentionNorm(norm) => Self::norm(norm, &s.x, &mut s.h, n),
                Stage::Qkv(qkv) => Self::qkv(qkv, heads, n, s)?,
                Stage::LatentQkv {
                    mla,
                    q,
                    kv_a,
                    kv_norm,
                    k_b,
                } => self.latent_qkv(mla, q, (kv_a, kv_norm), k_b, n, s)?,
                Stage::LatentOutput { mla, v_b } => self.latent_output(mla, v_b, n, s)?,
                Stage::QkNorm { eps, q, k } => Self::qk_norm(heads, q, k, *eps, n, s),
                Stage::ValueNorm { eps } => {
                    for head in s.v[..n * heads.kv_dim()].chunks_exact_mut(heads.head_dim) {
                        ops::rms_normalize_inplace(head, *eps);
                    }
                }
                Stage::QueryNorm { eps, q } => {
                    for head in s.q[..n * heads.q_dim()].chunks_exact_mut(heads.head_dim) {
                        ops::rms_norm_inplace(head, q, *eps);
                    }
                }
                Stage::Rope(params) => {
                    let keys = block.kv_source().is_none();
                    self.rope(heads, params, keys, s);
                }
                Stage::Attention { params, sinks } => {
                    Self::store_kv(layer, heads, seqs, s);
                    let sinks = sinks.as_deref();
                    self.attention([layer, layer], params, sinks, n, seqs, s);
                }
                Stage::SharedAttention { params, source } => {
                    self.attention([layer, *source], params, None, n, seqs, s);
                }
                Stage::AttentionGate => {
                    let len = n * heads.q_dim();
                    for (a, &g) in s.attn[..len].iter_mut().zip(&s.attn_gate[..len]) {
                        *a *= ops::sigmoid(g);
                    }
                }
                Stage::ShortConv {
                    conv,
                    in_proj,
                    kernel,
                    out_proj,
                } => mixer::short_conv(
                    layer,
                    conv,
                    (in_proj, kernel.as_slice(), out_proj),
                    n,
                    seqs,
                    s,
                )?,
                Stage::DeltaNet { net, weights } => {
                    mixer::delta_net(layer, net, weights, n, seqs, s)?;
                }
                Stage::AttentionOutput(output) => {
                    linear(output, &s.attn, n, &mut s.out, &mut s.products)?;
                }
                Stage::PostAttentionNorm(norm) => Self::norm_in_place(norm, &mut s.out, n),
                Stage::AttentionResidual => add_rows(&mut s.x[..len], &s.out[..len]),
                Stage::FfnNorm(norm) => Self::norm(norm, &s.x, &mut s.h, n),
                Stage::Ffn { ffn, up, down } => self.ffn(*ffn, up, down, n, s)?,
                Stage::Router {
                    router,
                    scores,
                    selection_bias,
                } => moe::route(router, scores, selection_bias.as_deref(), n, s)?,
                Stage::RouterNorm { norm, scale } => {
                    Self::norm(norm, &s.x, &mut s.h, n);
                    ops::scale(&mut s.h[..len], *scale);
                }
                Stage::ExpertScales(scales) => {
                    let used = block.router().map_or(0, |r| r.used);
                    let m = &mut s.moe;
                    let slots = m.weights[..n * used].iter_mut().zip(&m.ids[..n * used]);
                    slots.for_each(|(w, &id)| *w *= scales[id as usize]);
                }
                Stage::StashFfn => s.moe.shared[..len].copy_from_slice(&s.h[..len]),
                Stage::AddStash => ops::add_inplace(&mut s.h[..len], &s.moe.shared[..len]),
                Stage::SharedExperts {
                    experts,
                    weights,
                    gate_inp,
                } => moe::shared(experts, weights.each(), gate_inp.as_deref(), n, s)?,
                Stage::Experts { experts, weights } => {
                    // The declaration puts a router before every experts stage.
                    let used = block.router().map_or(0, |r| r.used);
                    let weights = weights.each().map(Vec::as_slice);
                    moe::run(experts, weights, hidden, used, n, s)?;
                    if block.shared_experts().is_some() {
                        ops::add_inplace(&mut s.h[..len], &s.moe.shared[..len]);
                    }
                }
                Stage::PostFfnNorm(norm) => Self::norm_in_place(norm, &mut s.h, n),
                Stage::FfnResidual => add_rows(&mut s.x[..len], &s.h[..len]),
                Stage::ParallelResidual => {
                    for ((x, a), f) in s.x[..len].iter_mut().zip(&s.out[..len]).zip(&s.h[..len]) {
                        *x += a + f;
                    }
                }
                Stage::PerLayerInput { gate, proj, norm } => {
                    self.per_layer_input(layer, gate, proj, norm, n, s)?;
                }
                Stage::OutputScale(scale) => ops::scale(&mut s.x[..len], scale[0]),
                Stage::ResidualNorm(norm) => Self::residual_norm(norm, s, n),
            }
        }
        Ok(())
    }

    /// Every row's key and value into its sequence's cache of `layer`, at its position.
    fn store_kv(layer: usize, heads: &Heads, seqs: &mut [SeqBatch<'_>], s: &Scratch) {
        let kv_dim = heads.kv_dim();
        for (i, source) in s.sources.iter().enumerate() {
            let row = i * kv_dim..(i + 1) * kv_dim;
            let (k, v) = (&s.k[row.clone()], &s.v[row]);
            seqs[source.seq].cache.store(layer, source.pos, k, v);
        }
    }

    /// `q`, `k` and `v` of the `n` rows of `s.h`.
    fn qkv(qkv: &Qkv<Cpu>, heads: &Heads, n: usize, s: &mut Scratch) -> Result<(), ModelError> {
        let (q_dim, kv_dim) = (heads.q_dim(), heads.kv_dim());
        match qkv {
            Qkv::OptionalValue { q, k, v: Some(v) } => {
                let outs = [&mut s.q[..], &mut s.k[..], &mut s.v[..]];
                linear_shared([q, k, v], &s.h, n, outs, &mut s.products)?;
            }
            Qkv::OptionalValue { q, k, v: None } => {
                let outs = [&mut s.q[..], &mut s.k[..]];
                linear_shared([q, k], &s.h, n, outs, &mut s.products)?;
                s.v[..n * kv_dim].copy_from_slice(&s.k[..n * kv_dim]);
            }
            Qkv::QueryOnly { q } => linear(q, &s.h, n, &mut s.q, &mut s.products)?,
            Qkv::Separate { q, k, v } => {
                let outs = [&mut s.q[..], &mut s.k[..], &mut s.v[..]];
                linear_shared([q, k, v], &s.h, n, outs, &mut s.products)?;
            }
            Qkv::GatedQuery { q, k, v } => {
                let outs = [&mut s.fused[..], &mut s.k[..], &mut s.v[..]];
                linear_shared([q, k, v], &s.h, n, outs, &mut s.products)?;
                let d = heads.head_dim;
                let rows = s.fused[..n * 2 * q_dim].chunks_exact(2 * d);
                let heads = s.q[..n * q_dim].chunks_exact_mut(d);
                let gates = s.attn_gate[..n * q_dim].chunks_exact_mut(d);
                for ((row, q), g) in rows.zip(heads).zip(gates) {
                    q.copy_from_slice(&row[..d]);
                    g.copy_from_slice(&row[d..]);
                }
            }
            Qkv::Fused(qkv) => {
                let width = q_dim + 2 * kv_dim;
                linear(qkv, &s.h, n, &mut s.fused, &mut s.products)?;
                for i in 0..n {
                    let row = &s.fused[i * width..(i + 1) * width];
                    s.q[i * q_dim..(i + 1) * q_dim].copy_from_slice(&row[..q_dim]);
                    s.k[i * kv_dim..(i + 1) * kv_dim].copy_from_slice(&row[q_dim..q_dim + kv_dim]);
                    s.v[i * kv_dim..(i + 1) * kv_dim].copy_from_slice(&row[q_dim + kv_dim..]);
                }
            }
        }
        Ok(())
    }

    /// Every head of `q` and `k` RMS-normed with its scales.
    fn qk_norm(h: &Heads, q_norm: &[f32], k_norm: &[f32], eps: f32, n: usize, s: &mut Scratch) {
        for head in s.q[..n * h.q_dim()].chunks_exact_mut(h.head_dim) {
            ops::rms_norm_inplace(head, q_norm, eps);
        }
        for head in s.k[..n * h.kv_dim()].chunks_exact_mut(h.head_dim) {
            ops::rms_norm_inplace(head, k_norm, eps);
        }
    }

    /// `q` of every row rotated at its position, and `k` with it where the layer projects
    /// keys (`keys`).
    fn rope(&self, heads: &Heads, params: &RopeParams, keys: bool, s: &mut Scratch) {
        let (q_dim, kv_dim, hd) = (heads.q_dim(), heads.kv_dim(), heads.head_dim);
        let freqs = self.transformer().rope_freqs.as_deref();
        let freqs = freqs.filter(|_| params.factors);
        for (i, source) in s.sources.iter().enumerate() {
            let q = &mut s.q[i * q_dim..(i + 1) * q_dim];
            ops::rope(q, hd, source.pos, params, freqs);
            if keys {
                let k = &mut s.k[i * kv_dim..(i + 1) * kv_dim];
                ops::rope(k, hd, source.pos, params, freqs);
            }
        }
    }

    /// Causal (and, with a window, sliding) attention of the `n` new queries over their
    /// sequences' caches, into `s.attn`. In an encoder every query sees its whole sequence:
    /// the kernel's key range ends at a row's position, so each row is given the position of
    /// its sequence's last row (all keys are stored before any query runs). `[layer, cache]`:
    /// the layer whose queries attend, and the one whose cache they read (itself, or the
    /// earlier layer it shares the cache of).
    fn attention(
        &self,
        [layer, cache]: [usize; 2],
        params: &AttentionParams,
        sinks: Option<&[f32]>,
        n: usize,
        seqs: &[SeqBatch<'_>],
        s: &mut Scratch,
    ) {
        let heads = &self.transformer().blocks[layer].heads;
        let shape = AttentionShape {
            heads: heads.heads,
            kv_heads: heads.kv_heads,
            head_dim: heads.head_dim,
        };
        let sources = &s.sources;
        let causal = self.transformer().causal;
        let last = |seq: usize, pos: usize| {
            if causal {
                pos
            } else {
                seqs[seq].cache.len() + seqs[seq].tokens.len() - 1
            }
        };
        let len = n * heads.q_dim();
        let (queries, out) = (&s.q[..len], &mut s.attn[..len]);
        // Every cache keeps a layer the same way: a ring on sliding-window layers, blocks on
        // the others; attention runs over the one kind the layer has.
        if self.config.window_of(layer).is_some() {
            let ring = |seq: usize| seqs[seq].cache.ring_rows(cache);
            let row = attention_row(sources, last, ring, "a sliding-window layer keeps a ring");
            ops::attention(&shape, params, sinks, queries, row, out);
        } else {
            let blocks = |seq: usize| seqs[seq].cache.paged_rows(cache);
            let row = attention_row(sources, last, blocks, "a full-attention layer keeps blocks");
            ops::attention(&shape, params, sinks, queries, row, out);
        }
    }

    /// `x += norm(proj(gelu(gate(x)) ⊙ input))` with each row's input to `layer` (gemma4's
    /// per-layer embeddings, prepared by the embedding).
    fn per_layer_input(
        &self,
        layer: usize,
        gate: &Linear,
        proj: &Linear,
        norm: &crate::weights::NormWeights,
        n: usize,
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let c = self.transformer();
        let width = c.per_layer_inputs.as_ref().map_or(0, |p| p.width);
        let all = width * c.layers();
        let hidden = c.hidden;
        linear(gate, &s.x, n, &mut s.per_layer_gate, &mut s.products)?;
        let gated = &mut s.per_layer_gate[..n * width];
        ops::apply(compute::GELU, gated);
        for (i, row) in gated.chunks_exact_mut(width).enumerate() {
            let input = &s.per_layer[i * all + layer * width..][..width];
            row.iter_mut().zip(input).for_each(|(g, x)| *g *= x);
        }
        linear(proj, &s.per_layer_gate, n, &mut s.out, &mut s.products)?;
        Self::norm_in_place(norm, &mut s.out, n);
        ops::add_inplace(&mut s.x[..n * hidden], &s.out[..n * hidden]);
        Ok(())
    }

    /// The feed-forward block from `s.h`; its output overwrites `s.h`.
    fn ffn(
        &self,
        ffn: Ffn,
        up: &FfnUp<Cpu>,
        down: &Linear,
        n: usize,
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let f = self.transformer().ffn_dim;
        match up {
            FfnUp::Gated { gate, up } => {
                let outs = [&mut s.gate[..], &mut s.up[..]];
                linear_shared([gate, up], &s.h, n, outs, &mut s.products)?;
            }
            FfnUp::FusedGated(gate_up) => {
                linear(gate_up, &s.h, n, &mut s.fused, &mut s.products)?;
                for i in 0..n {
                    let row = &s.fused[i * 2 * f..(i + 1) * 2 * f];
                    s.gate[i * f..(i + 1) * f].copy_from_slice(&row[..f]);
                    s.up[i * f..(i + 1) * f].copy_from_slice(&row[f..]);
                }
            }
            FfnUp::Plain(up) => {
                linear(up, &s.h, n, &mut s.gate, &mut s.products)?;
            }
        }
        let gate = &mut s.gate[..n * f];
        let vector = rinfer_kernels::Kernels::detected().vector();
        let gated = |act: Activation, gate: &mut [f32], up: &[f32]| {
            gate.par_chunks_mut(f)
                .zip(up.par_chunks(f))
                .for_each(|(g, u)| vector.gated_inplace(act, g, u));
        };
        match ffn {
            Ffn::SiluGated => gated(Activation::Silu, gate, &s.up[..n * f]),
            Ffn::GeluGated => gated(compute::GELU, gate, &s.up[..n * f]),
            Ffn::Gelu => gate
                .par_chunks_mut(f)
                .for_each(|row| vector.activate_inplace(compute::GELU, row)),
            Ffn::ClampedSwiGlu => ops::swiglu_clamped_inplace(gate, &s.up[..n * f]),
        }
        linear(down, &s.gate, n, &mut s.h, &mut s.products)
    }
}

/// The row source attention reads: for the batch row `i`, the last position it attends to
/// (`last(seq, pos)` of its sequence and position) and its sequence's cache rows of the layer
/// (`rows(seq)`, which the layer's kind of cache must give: `missing` says why otherwise).
fn attention_row<R>(
    sources: &[RowSource],
    last: impl Fn(usize, usize) -> usize + Sync,
    rows: impl Fn(usize) -> Option<R> + Sync,
    missing: &'static str,
) -> impl Fn(usize) -> (usize, R) + Sync {
    move |i| {
        let RowSource { seq, pos } = sources[i];
        (last(seq, pos), rows(seq).expect(missing))
    }
}
