//! The one forward pass: tokens at positions, a KV cache and scratch buffers in, logits out.
//!
//! Prefill and decode differ only in the batch size. Every reduction runs in a fixed order per
//! output element, so the logits of a position do not depend on the batch it was computed in
//! nor on the number of threads.

use rayon::prelude::*;

use rinfer_kernels::ops::{self, Activation, VectorKernels};

use crate::compute::{self, linear};
use crate::config::{Ffn, ModelConfig, NormKind, Positional, Rope};
use crate::error::ModelError;
use crate::kv_cache::KvCache;
use crate::scratch::Scratch;
use crate::weights::{FfnUp, LayerWeights, NormWeights, Qkv, Weights};

/// Which positions of a batch get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token (generation).
    Last,
    /// Every token (scoring, `rinfer logits`); the batch must fit in the scratch buffers.
    All,
}

/// A loaded model: its configuration and weights.
pub struct Model {
    /// Dimensions and features.
    pub config: ModelConfig,
    /// The weights.
    pub weights: Weights,
}

/// One sequence's share of a batched forward pass.
pub struct SeqBatch<'a> {
    /// Tokens to run, at the positions following those already in `cache`.
    pub tokens: &'a [u32],
    /// The sequence's KV cache; the tokens' keys and values are appended to it.
    pub cache: &'a mut KvCache,
    /// Which of these tokens get logits.
    pub logits: Logits,
}

/// Keys scored together before the values they weight are summed.
const KEY_BLOCK: usize = 32;

/// Where one row of a batch comes from: its sequence and position.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RowSource {
    pub(crate) seq: usize,
    pub(crate) pos: usize,
}

impl Model {
    /// Runs `tokens` at the positions following those in `cache`, appends their keys and values
    /// to it, and returns the logits asked for: `[vocab]` for [`Logits::Last`], `[n, vocab]` for
    /// [`Logits::All`]; they are the scratch's own buffer, so a sampler may modify them in place. Prompts longer than the scratch's batch run in several passes (only with
    /// [`Logits::Last`]).
    pub fn forward<'s>(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        scratch: &'s mut Scratch,
        wanted: Logits,
    ) -> Result<&'s mut [f32], ModelError> {
        if wanted == Logits::All && tokens.len() > scratch.max_logit_rows {
            return Err(ModelError::BatchTooLarge {
                rows: tokens.len(),
                max_batch: scratch.max_logit_rows,
            });
        }
        self.check(tokens, cache)?;
        let mut rows = 0;
        for chunk in tokens.chunks(scratch.max_batch) {
            let mut seq = [SeqBatch {
                tokens: chunk,
                cache: &mut *cache,
                logits: wanted,
            }];
            rows = self.forward_batch(&mut seq, scratch)?.len();
        }
        Ok(&mut scratch.logits[..rows])
    }

    /// Runs every sequence's tokens in one pass, so each weight is read once for all rows, and
    /// returns the logits rows concatenated in the order of `seqs`: one row for
    /// [`Logits::Last`] (none for a sequence without tokens), one per token for [`Logits::All`].
    /// The tokens of all sequences together must fit the scratch's batch, and the logits rows
    /// its logits rows. A sequence's logits do not depend on what runs beside it.
    ///
    /// Every sequence is checked before any work, so an error leaves every cache unchanged.
    pub fn forward_batch<'s>(
        &self,
        seqs: &mut [SeqBatch<'_>],
        scratch: &'s mut Scratch,
    ) -> Result<&'s mut [f32], ModelError> {
        let total: usize = seqs.iter().map(|s| s.tokens.len()).sum();
        if total > scratch.max_batch {
            return Err(ModelError::BatchTooLarge {
                rows: total,
                max_batch: scratch.max_batch,
            });
        }
        let logit_rows: usize = seqs
            .iter()
            .map(|s| match s.logits {
                Logits::All => s.tokens.len(),
                Logits::Last => usize::from(!s.tokens.is_empty()),
            })
            .sum();
        if logit_rows > scratch.max_logit_rows {
            return Err(ModelError::BatchTooLarge {
                rows: logit_rows,
                max_batch: scratch.max_logit_rows,
            });
        }
        for seq in seqs.iter() {
            self.check(seq.tokens, seq.cache)?;
        }
        scratch.sources.clear();
        for (index, seq) in seqs.iter().enumerate() {
            let pos0 = seq.cache.len();
            scratch
                .sources
                .extend((0..seq.tokens.len()).map(|i| RowSource {
                    seq: index,
                    pos: pos0 + i,
                }));
        }
        if total == 0 {
            return Ok(&mut scratch.logits[..0]);
        }
        self.embed(seqs, scratch)?;
        for (layer, weights) in self.weights.layers.iter().enumerate() {
            self.block(layer, weights, total, seqs, scratch)?;
        }
        for seq in seqs.iter_mut() {
            seq.cache.advance(seq.tokens.len());
        }
        let rows = self.head(seqs, scratch)?;
        Ok(&mut scratch.logits[..rows * self.config.vocab_size])
    }

    /// Rejects tokens outside the vocabulary, a cache too small for them, and positions past a
    /// learned position table.
    fn check(&self, tokens: &[u32], cache: &KvCache) -> Result<(), ModelError> {
        let c = &self.config;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(ModelError::TokenOutOfRange {
                id,
                vocab: c.vocab_size,
            });
        }
        if cache.len() + tokens.len() > cache.context() {
            return Err(ModelError::ContextOverflow {
                prompt: cache.len(),
                requested: tokens.len(),
                context: cache.context(),
            });
        }
        let needed = cache.len() + tokens.len();
        if let Some(limit) = self.position_limit()
            && needed > limit
        {
            return Err(ModelError::PositionsExceeded { needed, limit });
        }
        Ok(())
    }

    fn embed(&self, seqs: &[SeqBatch<'_>], s: &mut Scratch) -> Result<(), ModelError> {
        let c = &self.config;
        let w = &self.weights;
        let tokens = seqs.iter().flat_map(|seq| seq.tokens.iter());
        for (i, (&tok, source)) in tokens.zip(&s.sources).enumerate() {
            let row = &mut s.x[i * c.hidden..(i + 1) * c.hidden];
            compute::dequantize(&w.token_embd, tok as usize, row)?;
            if let Some(scale) = c.embedding_scale {
                ops::scale(row, scale);
            }
            if let Some(pos_embd) = &w.position_embd {
                let position = &mut s.h[..c.hidden];
                compute::dequantize(pos_embd, source.pos, position)?;
                ops::add_inplace(row, position);
            }
        }
        Ok(())
    }

    fn norm(&self, weights: &NormWeights, x: &[f32], out: &mut [f32], n: usize) {
        let d = weights.weight.len();
        for (xr, or) in x[..n * d]
            .chunks_exact(d)
            .zip(out[..n * d].chunks_exact_mut(d))
        {
            match self.config.norm {
                NormKind::Rms => ops::rms_norm(xr, &weights.weight, self.config.norm_eps, or),
                NormKind::Layer => ops::layer_norm(
                    xr,
                    &weights.weight,
                    weights.bias.as_deref(),
                    self.config.norm_eps,
                    or,
                ),
            }
        }
    }

    fn norm_in_place(&self, weights: &NormWeights, x: &mut [f32], n: usize) {
        let d = weights.weight.len();
        for row in x[..n * d].chunks_exact_mut(d) {
            match self.config.norm {
                NormKind::Rms => ops::rms_norm_inplace(row, &weights.weight, self.config.norm_eps),
                NormKind::Layer => ops::layer_norm_inplace(
                    row,
                    &weights.weight,
                    weights.bias.as_deref(),
                    self.config.norm_eps,
                ),
            }
        }
    }

    fn block(
        &self,
        layer: usize,
        w: &LayerWeights,
        n: usize,
        seqs: &mut [SeqBatch<'_>],
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let (hidden, q_dim, kv_dim) = (c.hidden, c.q_dim(), c.kv_dim());
        self.norm(&w.attn_norm, &s.x, &mut s.h, n);

        match &w.qkv {
            Qkv::Separate { q, k, v } => {
                linear(q, &s.h, n, &mut s.q, &mut s.act)?;
                linear(k, &s.h, n, &mut s.k, &mut s.act)?;
                linear(v, &s.h, n, &mut s.v, &mut s.act)?;
            }
            Qkv::Fused(qkv) => {
                let width = q_dim + 2 * kv_dim;
                linear(qkv, &s.h, n, &mut s.fused, &mut s.act)?;
                for i in 0..n {
                    let row = &s.fused[i * width..(i + 1) * width];
                    s.q[i * q_dim..(i + 1) * q_dim].copy_from_slice(&row[..q_dim]);
                    s.k[i * kv_dim..(i + 1) * kv_dim].copy_from_slice(&row[q_dim..q_dim + kv_dim]);
                    s.v[i * kv_dim..(i + 1) * kv_dim].copy_from_slice(&row[q_dim + kv_dim..]);
                }
            }
        }
        if let Some((q_norm, k_norm)) = &w.qk_norm {
            for head in s.q[..n * q_dim].chunks_exact_mut(c.head_dim) {
                ops::rms_norm_inplace(head, q_norm, c.norm_eps);
            }
            for head in s.k[..n * kv_dim].chunks_exact_mut(c.head_dim) {
                ops::rms_norm_inplace(head, k_norm, c.norm_eps);
            }
        }
        if let Positional::Rope(rope) = c.positional {
            let base = if c.window_of(layer).is_some() {
                rope.base_local
            } else {
                rope.base
            };
            for (i, source) in s.sources.iter().enumerate() {
                self.rope(
                    &rope,
                    base,
                    source.pos,
                    &mut s.q[i * q_dim..(i + 1) * q_dim],
                );
                self.rope(
                    &rope,
                    base,
                    source.pos,
                    &mut s.k[i * kv_dim..(i + 1) * kv_dim],
                );
            }
        }
        for (i, source) in s.sources.iter().enumerate() {
            seqs[source.seq].cache.store(
                layer,
                source.pos,
                &s.k[i * kv_dim..(i + 1) * kv_dim],
                &s.v[i * kv_dim..(i + 1) * kv_dim],
            );
        }
        self.attention(layer, n, seqs, &s.sources, &s.q, &mut s.attn)?;
        linear(&w.attn_output, &s.attn, n, &mut s.out, &mut s.act)?;
        if let Some(post) = &w.post_attn_norm {
            self.norm_in_place(post, &mut s.out, n);
        }

        if c.parallel_block {
            // Attention and FFN both read `h`; the FFN result lands in `h` once it is consumed.
            self.ffn(w, n, s)?;
            for ((x, a), f) in s.x[..n * hidden]
                .iter_mut()
                .zip(&s.out[..n * hidden])
                .zip(&s.h[..n * hidden])
            {
                *x += a + f;
            }
            return Ok(());
        }
        ops::add_inplace(&mut s.x[..n * hidden], &s.out[..n * hidden]);
        if let Some(ffn_norm) = &w.ffn_norm {
            self.norm(ffn_norm, &s.x, &mut s.h, n);
        }
        self.ffn(w, n, s)?;
        if let Some(post) = &w.post_ffn_norm {
            self.norm_in_place(post, &mut s.h, n);
        }
        ops::add_inplace(&mut s.x[..n * hidden], &s.h[..n * hidden]);
        Ok(())
    }

    /// The feed-forward block from `s.h`; its output overwrites `s.h`.
    fn ffn(&self, w: &LayerWeights, n: usize, s: &mut Scratch) -> Result<(), ModelError> {
        let c = &self.config;
        let f = c.ffn_dim;
        match &w.ffn_up {
            FfnUp::Gated { gate, up } => {
                linear(gate, &s.h, n, &mut s.gate, &mut s.act)?;
                linear(up, &s.h, n, &mut s.up, &mut s.act)?;
            }
            FfnUp::FusedGated(gate_up) => {
                linear(gate_up, &s.h, n, &mut s.fused, &mut s.act)?;
                for i in 0..n {
                    let row = &s.fused[i * 2 * f..(i + 1) * 2 * f];
                    s.gate[i * f..(i + 1) * f].copy_from_slice(&row[..f]);
                    s.up[i * f..(i + 1) * f].copy_from_slice(&row[f..]);
                }
            }
            FfnUp::Plain(up) => {
                linear(up, &s.h, n, &mut s.gate, &mut s.act)?;
            }
        }
        let gate = &mut s.gate[..n * f];
        let gated = |act: Activation, gate: &mut [f32], up: &[f32]| {
            let vector = VectorKernels::detected();
            gate.par_chunks_mut(f)
                .zip(up.par_chunks(f))
                .for_each(|(g, u)| vector.gated_inplace(act, g, u));
        };
        match c.ffn {
            Ffn::SiluGated => gated(Activation::Silu, gate, &s.up[..n * f]),
            Ffn::GeluGated => gated(compute::GELU, gate, &s.up[..n * f]),
            Ffn::Gelu => ops::apply(compute::GELU, gate),
        }
        linear(&w.ffn_down, &s.gate, n, &mut s.h, &mut s.act)
    }

    fn rope(&self, rope: &Rope, base: f32, pos: usize, x: &mut [f32]) {
        let freqs = self.weights.rope_freqs.as_deref();
        compute::rope(x, self.config.head_dim, pos, rope, base, freqs);
    }

    /// Causal (and, on sliding-window layers, windowed) attention of the `n` new queries over
    /// their sequences' caches, into `out` `[n, q_dim]`. One task per (row, head); keys are taken
    /// in position order, [`KEY_BLOCK`] at a time: their scores (four keys per `dot4`), then one
    /// rescale of the running sum if the maximum grew, then the weighted values. The order never
    /// depends on threads.
    fn attention(
        &self,
        layer: usize,
        n: usize,
        seqs: &[SeqBatch<'_>],
        sources: &[RowSource],
        q: &[f32],
        out: &mut [f32],
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let (hd, heads) = (c.head_dim, c.heads);
        let group = heads / c.kv_heads;
        let window = c.window_of(layer);
        let vector = VectorKernels::detected();
        out[..n * c.q_dim()]
            .par_chunks_mut(hd)
            .enumerate()
            .for_each(|(job, acc)| {
                let (i, h) = (job / heads, job % heads);
                let RowSource { seq, pos } = sources[i];
                let cache: &KvCache = seqs[seq].cache;
                let kv = (h / group) * hd;
                let query = &q[i * c.q_dim() + h * hd..i * c.q_dim() + (h + 1) * hd];
                let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                acc.fill(0.0);
                let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
                let mut scores = [0.0f32; KEY_BLOCK];
                let key = |j: usize| &cache.get(layer, j).0[kv..kv + hd];
                let value = |j: usize| &cache.get(layer, j).1[kv..kv + hd];
                for start in (first..=pos).step_by(KEY_BLOCK) {
                    let end = (start + KEY_BLOCK).min(pos + 1);
                    let scores = &mut scores[..end - start];
                    // Four keys per call; a short last group repeats its last key.
                    for (group, j0) in scores.chunks_mut(4).zip((start..).step_by(4)) {
                        let last = j0 + group.len() - 1;
                        let keys = [0, 1, 2, 3].map(|d| key((j0 + d).min(last)));
                        for (score, dot) in group.iter_mut().zip(vector.dot4(query, keys)) {
                            let mut s = dot * c.attention_scale;
                            if let Some(cap) = c.attn_softcap {
                                s = cap * (s / cap).tanh();
                            }
                            *score = s;
                        }
                    }
                    let block_max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
                    if block_max > max {
                        let rescale = (max - block_max).exp();
                        sum *= rescale;
                        acc.iter_mut().for_each(|a| *a *= rescale);
                        max = block_max;
                    }
                    for (group, j0) in scores.chunks(4).zip((start..).step_by(4)) {
                        let mut weights = [0.0f32; 4];
                        for (w, &score) in weights.iter_mut().zip(group) {
                            *w = (score - max).exp();
                            sum += *w;
                        }
                        if group.len() == 4 {
                            let values = [0, 1, 2, 3].map(|d| value(j0 + d));
                            vector.axpy4(weights, values, acc);
                        } else {
                            for (d, &w) in weights[..group.len()].iter().enumerate() {
                                vector.axpy(w, value(j0 + d), acc);
                            }
                        }
                    }
                }
                let inv = 1.0 / sum;
                acc.iter_mut().for_each(|a| *a *= inv);
            });
        Ok(())
    }

    /// Final norm and LM head for the rows each sequence wants, into `s.logits`; returns the
    /// number of logits rows.
    fn head(&self, seqs: &[SeqBatch<'_>], s: &mut Scratch) -> Result<usize, ModelError> {
        let c = &self.config;
        let d = c.hidden;
        let mut rows = 0;
        let mut first = 0;
        for seq in seqs {
            let n = seq.tokens.len();
            let wanted = match seq.logits {
                Logits::All => first..first + n,
                Logits::Last if n > 0 => first + n - 1..first + n,
                Logits::Last => first..first,
            };
            for row in wanted {
                let src = &s.x[row * d..(row + 1) * d];
                self.norm(&self.weights.output_norm, src, &mut s.h[rows * d..], 1);
                rows += 1;
            }
            first += n;
        }
        compute::matmul(
            self.weights.lm_head(),
            &s.h,
            rows,
            &mut s.logits,
            &mut s.act,
        )?;
        let logits = &mut s.logits[..rows * c.vocab_size];
        if let Some(bias) = &self.weights.output_bias {
            for row in logits.chunks_exact_mut(c.vocab_size) {
                ops::add_inplace(row, bias);
            }
        }
        if let Some(cap) = c.final_softcap {
            ops::softcap(logits, cap);
        }
        Ok(rows)
    }
}
