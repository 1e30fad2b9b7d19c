//! The one forward pass: tokens at positions, a KV cache and scratch buffers in, logits out.
//! It walks the model's [`Transformer`]: the embedding, every layer's stages (run by the block
//! executor in `block.rs`), then the head.
//!
//! Prefill and decode differ only in the batch size. Every reduction runs in a fixed order per
//! output element, so the logits of a position do not depend on the batch it was computed in
//! nor on the number of threads.

use rinfer_kernels::ops;
use rinfer_transformer::{NormKind, PerLayerInputs, Transformer};

use crate::compute;
use crate::config::{ModelConfig, Pooling, Rank, RankHead};
use crate::error::ModelError;
use crate::kv_cache::KvCache;
use crate::observe::Products;
use crate::rows;
use crate::scratch::{RowSource, Scratch};
use crate::weights::{Cpu, NormWeights, Weights};

/// Which positions of a batch get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token (generation).
    Last,
    /// Every token (scoring, `rinfer logits`); the batch must fit in the scratch buffers.
    All,
    /// No logits: the final hidden states of the sequence's tokens (after the output norm,
    /// if any) pooled into one embedding row of `hidden` values ([`Scratch::pooled`]; a
    /// ranker's scores are the first [`Pooling::width`] of them). The whole sequence must run
    /// in this one pass.
    Pooled(Pooling),
}

/// A loaded model: its configuration and the transformer it describes, with its weights.
pub struct Model {
    /// Dimensions and features.
    pub config: ModelConfig,
    /// What the forward pass runs: the configuration's transformer with the loaded weights.
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

impl Model {
    /// The model of `config` with `weights` (loaded for that configuration).
    pub fn new(config: ModelConfig, weights: Weights) -> Self {
        Self { config, weights }
    }

    /// The transformer the forward pass runs (and the GPU backend uploads), with its weights.
    pub fn transformer(&self) -> &Transformer<Cpu> {
        &self.weights.transformer
    }

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
    /// [`Logits::Last`] (none for a sequence without tokens), one per token for [`Logits::All`],
    /// none for [`Logits::Pooled`] (its embedding goes to [`Scratch::pooled`], in the same
    /// order). The tokens of all sequences together must fit the scratch's batch, and the
    /// logits and embedding rows its logits rows. A sequence's logits do not depend on what
    /// runs beside it.
    ///
    /// Every sequence is checked before any work, so an error leaves every cache's positions
    /// unchanged.
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
                Logits::Last | Logits::Pooled(_) => usize::from(!s.tokens.is_empty()),
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
            let pooled = matches!(seq.logits, Logits::Pooled(_));
            if (pooled || !self.transformer().causal) && !seq.cache.is_empty() {
                return Err(ModelError::InvalidRequest(
                    "an embedding (and every pass of an encoder) must run its whole sequence in \
                     one pass"
                        .into(),
                ));
            }
        }
        for seq in seqs.iter_mut() {
            seq.cache.prepare(seq.tokens.len())?;
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
        for layer in 0..self.transformer().layers() {
            self.block(layer, total, seqs, scratch)?;
        }
        for seq in seqs.iter_mut() {
            seq.cache.advance(seq.tokens.len());
        }
        let rows = self.head(seqs, scratch)?;
        Ok(&mut scratch.logits[..rows * self.transformer().vocab_size])
    }

    /// Rejects tokens outside the vocabulary, a cache too small for them, and positions past a
    /// learned position table.
    fn check(&self, tokens: &[u32], cache: &KvCache) -> Result<(), ModelError> {
        let c = self.transformer();
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
        let c = self.transformer();
        let tokens = seqs.iter().flat_map(|seq| seq.tokens.iter());
        let mut n = 0;
        for (i, (&tok, source)) in tokens.zip(&s.sources).enumerate() {
            let row = &mut s.x[i * c.hidden..(i + 1) * c.hidden];
            compute::dequantize(&c.token_embd, tok as usize, row)?;
            if let Some(scale) = c.embedding_scale {
                ops::scale(row, scale);
            }
            if let Some(pos_embd) = &c.position_embd {
                let position = &mut s.h[..c.hidden];
                compute::dequantize(pos_embd, source.pos, position)?;
                ops::add_inplace(row, position);
            }
            if let Some(types) = &c.token_types {
                let token_type = &mut s.h[..c.hidden];
                compute::dequantize(types, 0, token_type)?;
                ops::add_inplace(row, token_type);
            }
            n = i + 1;
        }
        if let Some(norm) = &c.embedding_norm {
            Self::residual_norm(norm, s, n);
        }
        if let Some(inputs) = &c.per_layer_inputs {
            let tokens = seqs.iter().flat_map(|seq| seq.tokens.iter().copied());
            Self::per_layer_inputs(c, inputs, tokens, s)?;
        }
        Ok(())
    }

    /// Every row's input to each layer, from its token and its scaled embedding `s.x`, into
    /// `s.per_layer` (see [`PerLayerInputs`]).
    fn per_layer_inputs(
        c: &Transformer<Cpu>,
        inputs: &PerLayerInputs<Cpu>,
        tokens: impl Iterator<Item = u32>,
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let width = inputs.width;
        let all = width * c.layers();
        let n = s.sources.len();
        compute::matmul(
            &inputs.model_proj,
            &s.x,
            n,
            &mut s.per_layer_gate,
            &mut s.products,
        )?;
        let proj_scale = 1.0 / (c.hidden as f32).sqrt();
        let token_scale = (width as f32).sqrt();
        let norm = &inputs.proj_norm;
        for (i, tok) in tokens.enumerate() {
            let row = &mut s.per_layer[i * all..(i + 1) * all];
            compute::dequantize(&inputs.token_embd, tok as usize, row)?;
            let proj = &mut s.per_layer_gate[i * all..(i + 1) * all];
            ops::scale(proj, proj_scale);
            for (slice, embd) in proj
                .chunks_exact_mut(width)
                .zip(row.chunks_exact_mut(width))
            {
                ops::rms_norm_inplace(slice, &norm.weight, norm.params.eps);
                for (e, p) in embd.iter_mut().zip(slice.iter()) {
                    *e = (p + *e * token_scale) * std::f32::consts::FRAC_1_SQRT_2;
                }
            }
        }
        Ok(())
    }

    /// `x = norm(x)` and `h = x` for `n` rows (a post-norm model's residual stream).
    pub(crate) fn residual_norm(weights: &NormWeights, s: &mut Scratch, n: usize) {
        let len = n * weights.weight.len();
        Self::norm_in_place(weights, &mut s.x, n);
        s.h[..len].copy_from_slice(&s.x[..len]);
    }

    /// `out = norm(x)` for `n` rows.
    pub(crate) fn norm(weights: &NormWeights, x: &[f32], out: &mut [f32], n: usize) {
        let (norm, d) = (weights.params, weights.weight.len());
        rows::each_with(&mut out[..n * d], &x[..n * d], d, |or, xr| {
            match norm.kind {
                NormKind::Rms => ops::rms_norm(xr, &weights.weight, norm.eps, or),
                NormKind::Layer => {
                    ops::layer_norm(xr, &weights.weight, weights.bias.as_deref(), norm.eps, or)
                }
            }
        });
    }

    /// `x = norm(x)` for `n` rows.
    pub(crate) fn norm_in_place(weights: &NormWeights, x: &mut [f32], n: usize) {
        let (norm, d) = (weights.params, weights.weight.len());
        rows::each(&mut x[..n * d], d, |row| match norm.kind {
            NormKind::Rms => ops::rms_norm_inplace(row, &weights.weight, norm.eps),
            NormKind::Layer => {
                ops::layer_norm_inplace(row, &weights.weight, weights.bias.as_deref(), norm.eps)
            }
        });
    }

    /// The embedding of one sequence whose final states are the rows of `x`: each row after
    /// the output norm (if the model has one), pooled; `row` is room for one normed row.
    /// The mean sums in row order. A ranker pools its first token's state (an encoder), its
    /// last's (a decoder) or the mean, then scores it ([`Model::classify`]).
    fn pool(
        &self,
        pooling: Pooling,
        x: &[f32],
        out: &mut [f32],
        row: &mut [f32],
        act: &mut Products,
    ) -> Result<(), ModelError> {
        let c = self.transformer();
        let d = c.hidden;
        let normed = |src: &[f32], dst: &mut [f32]| match &c.output_norm {
            Some(norm) => Self::norm(norm, src, dst, 1),
            None => dst.copy_from_slice(src),
        };
        let rows = x.len() / d;
        let (first, last) = (&x[..d], &x[(rows - 1) * d..]);
        let mean = |out: &mut [f32], row: &mut [f32]| {
            out.fill(0.0);
            for src in x.chunks_exact(d) {
                normed(src, row);
                ops::add_inplace(out, row);
            }
            ops::scale(out, 1.0 / rows as f32);
        };
        match pooling {
            Pooling::Cls => normed(first, out),
            Pooling::Last => normed(last, out),
            Pooling::Mean => mean(out, row),
            Pooling::Rank(rank) => {
                match (rank.mean, c.causal) {
                    (true, _) => mean(out, row),
                    (false, true) => normed(last, out),
                    (false, false) => normed(first, out),
                }
                self.classify(rank, out, row, act)?;
            }
        }
        Ok(())
    }

    /// A ranker's head (llama.cpp's `build_pooling`, rank) over the pooled state in `x`
    /// (`hidden` values): `x = tanh(cls · x + b)`, then `x = cls.output · x + b` (each where the
    /// file has it), then Qwen3's softmax; the scores are `x[..labels]`. `tmp` is room for
    /// `hidden` values.
    fn classify(
        &self,
        rank: Rank,
        x: &mut [f32],
        tmp: &mut [f32],
        act: &mut Products,
    ) -> Result<(), ModelError> {
        let Some(cls) = &self.transformer().classifier else {
            return Ok(());
        };
        let mut width = x.len();
        if let Some(dense) = &cls.dense {
            compute::linear(dense, x, 1, tmp, act)?;
            ops::tanh_inplace(&mut tmp[..width]);
            x.copy_from_slice(&tmp[..width]);
        }
        if let Some(output) = &cls.output {
            width = output.weight.rows;
            compute::linear(output, x, 1, tmp, act)?;
            x[..width].copy_from_slice(&tmp[..width]);
        }
        if rank.head == Some(RankHead::Qwen3) {
            ops::softmax_inplace(&mut x[..width]);
        }
        Ok(())
    }

    /// The embeddings of the sequences that want one, into `s.out` (see [`Scratch::pooled`]),
    /// then the final norm and LM head for the rows the others want, into `s.logits`; returns
    /// the number of logits rows.
    fn head(&self, seqs: &[SeqBatch<'_>], s: &mut Scratch) -> Result<usize, ModelError> {
        let c = self.transformer();
        let d = c.hidden;
        let mut first = 0;
        let mut pooled = 0;
        for seq in seqs {
            let n = seq.tokens.len();
            if let (Logits::Pooled(pooling), true) = (seq.logits, n > 0) {
                let (x, out) = (&s.x, &mut s.out[pooled * d..(pooled + 1) * d]);
                let x = &x[first * d..(first + n) * d];
                self.pool(pooling, x, out, &mut s.h[..d], &mut s.products)?;
                pooled += 1;
            }
            first += n;
        }
        let mut rows = 0;
        let mut first = 0;
        for seq in seqs {
            let n = seq.tokens.len();
            let wanted = match seq.logits {
                Logits::All => first..first + n,
                Logits::Last if n > 0 => first + n - 1..first + n,
                Logits::Last | Logits::Pooled(_) => first..first,
            };
            for row in wanted {
                let src = &s.x[row * d..(row + 1) * d];
                let out = &mut s.h[rows * d..(rows + 1) * d];
                match &c.output_norm {
                    Some(norm) => Self::norm(norm, src, out, 1),
                    None => out.copy_from_slice(src),
                }
                rows += 1;
            }
            first += n;
        }
        if rows == 0 {
            return Ok(0);
        }
        compute::matmul(c.lm_head(), &s.h, rows, &mut s.logits, &mut s.products)?;
        let logits = &mut s.logits[..rows * c.vocab_size];
        if let Some(bias) = &c.output_bias {
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
