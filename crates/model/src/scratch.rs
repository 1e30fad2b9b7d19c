//! Activation buffers for one forward call, sized once for the largest batch.

use crate::config::ModelConfig;
use crate::observe::{MatmulObserver, Products};

/// Every intermediate of the forward pass; rows are tokens of the batch.
pub struct Scratch {
    /// Largest batch these buffers hold.
    pub(crate) max_batch: usize,
    /// Most rows of logits one pass may produce.
    pub(crate) max_logit_rows: usize,
    /// Residual stream `[n, hidden]`.
    pub(crate) x: Vec<f32>,
    /// Normed input `[n, hidden]`.
    pub(crate) h: Vec<f32>,
    /// Queries `[n, q_dim]`.
    pub(crate) q: Vec<f32>,
    /// Keys `[n, kv_dim]`.
    pub(crate) k: Vec<f32>,
    /// Values `[n, kv_dim]`.
    pub(crate) v: Vec<f32>,
    /// Fused projection output `[n, max(q+2kv, 2ffn)]`.
    pub(crate) fused: Vec<f32>,
    /// Attention output `[n, q_dim]`.
    pub(crate) attn: Vec<f32>,
    /// Block output `[n, hidden]`.
    pub(crate) out: Vec<f32>,
    /// FFN gate `[n, ffn]`.
    pub(crate) gate: Vec<f32>,
    /// FFN up `[n, ffn]`.
    pub(crate) up: Vec<f32>,
    /// Logits `[n, vocab]`.
    pub(crate) logits: Vec<f32>,
    /// Every row's input to each layer `[n, layers · width]` (gemma4's per-layer embeddings;
    /// empty without them).
    pub(crate) per_layer: Vec<f32>,
    /// The projection of every row's embedding to its per-layer inputs `[n, layers · width]`,
    /// then one layer's gated per-layer input `[n, width]`.
    pub(crate) per_layer_gate: Vec<f32>,
    /// Mixture-of-experts buffers (empty for dense models).
    pub(crate) moe: MoeScratch,
    /// Latent attention buffers (empty for other models).
    pub(crate) latent: LatentScratch,
    /// Recurrent mixers' buffers (empty for models without recurrent layers).
    pub(crate) mixer: MixerScratch,
    /// Gated attention's gates `[n, q_dim]` (empty without gated attention).
    pub(crate) attn_gate: Vec<f32>,
    /// Sequence and position of every row of the batch.
    pub(crate) sources: Vec<RowSource>,
    /// The matmul kernels' quantized-activation buffer, and the observer of their inputs.
    pub(crate) products: Products,
}

impl Scratch {
    /// Shows `observer` the input rows of every matrix product of the following forward
    /// passes (see [`crate::observe`]); returns the observer it replaces.
    pub fn set_observer(
        &mut self,
        observer: Box<dyn MatmulObserver>,
    ) -> Option<Box<dyn MatmulObserver>> {
        self.products.set_observer(Some(observer))
    }

    /// The observer of the products, if one is set.
    pub fn observer_mut(&mut self) -> Option<&mut dyn MatmulObserver> {
        self.products.observer_mut()
    }

    /// Stops observing the products, returning the observer.
    pub fn take_observer(&mut self) -> Option<Box<dyn MatmulObserver>> {
        self.products.set_observer(None)
    }

    /// The embeddings of the last pass's sequences that wanted one
    /// ([`Logits::Pooled`](crate::forward::Logits::Pooled)), `[rows, hidden]` in the order of
    /// those sequences: they are written to the block-output buffer, free once the layers are
    /// done.
    pub fn pooled(&self, rows: usize, hidden: usize) -> &[f32] {
        &self.out[..rows * hidden]
    }

    /// The first `rows` logits rows and the first `pooled` embeddings of the last pass.
    pub(crate) fn split_output(
        &mut self,
        rows: usize,
        pooled: usize,
        hidden: usize,
    ) -> (&mut [f32], &[f32]) {
        (&mut self.logits[..rows], &self.out[..pooled * hidden])
    }

    /// Bytes of the f32 buffers (the quantized-activation buffer aside).
    pub fn bytes(&self) -> usize {
        let buffers = [
            &self.x,
            &self.h,
            &self.q,
            &self.k,
            &self.v,
            &self.fused,
            &self.attn,
            &self.out,
            &self.gate,
            &self.up,
            &self.logits,
            &self.per_layer,
            &self.per_layer_gate,
        ];
        buffers.iter().map(|b| b.len() * 4).sum::<usize>()
            + self.moe.bytes()
            + self.latent.bytes()
            + self.mixer.bytes()
            + self.attn_gate.len() * 4
    }

    /// Bytes of the f32 buffers [`Scratch::with_logit_rows`] allocates for these sizes, or `None`
    /// when that overflows the address space.
    pub fn bytes_for(
        config: &ModelConfig,
        max_batch: usize,
        max_logit_rows: usize,
    ) -> Option<usize> {
        let n = max_batch.max(1);
        let logit_rows = max_logit_rows.clamp(1, n);
        let fused = fused_width(config);
        let per_row = 3 * config.hidden
            + config.q_dim()
            + attn_width(config)
            + 2 * config.kv_dim()
            + fused
            + 2 * config.ffn_dim
            + per_layer_floats(config).checked_mul(2)?
            + usize::from(config.gated_attention) * config.q_dim();
        let extra = MoeScratch::floats_per_row(config)?
            .checked_add(LatentScratch::floats_per_row(config)?)?
            .checked_add(MixerScratch::floats_per_row(config)?)?;
        let rows = n.checked_mul(per_row.checked_add(extra)?)?;
        let logits = logit_rows.checked_mul(config.vocab_size)?;
        rows.checked_add(logits)?
            .checked_mul(std::mem::size_of::<f32>())
            .filter(|&bytes| bytes <= isize::MAX as usize)
    }

    /// Buffers for batches of up to `max_batch` tokens of `config`'s model, every one of which
    /// may ask for logits.
    pub fn new(config: &ModelConfig, max_batch: usize) -> Self {
        Self::with_logit_rows(config, max_batch, max_batch)
    }

    /// Buffers for batches of up to `max_batch` tokens of which at most `max_logit_rows` ask for
    /// logits: generation needs one row per sequence, and a row of a large vocabulary is big
    /// (1 MiB for 262144 tokens).
    pub fn with_logit_rows(config: &ModelConfig, max_batch: usize, max_logit_rows: usize) -> Self {
        let n = max_batch.max(1);
        let logit_rows = max_logit_rows.clamp(1, n);
        let fused = fused_width(config);
        Self {
            max_batch: n,
            max_logit_rows: logit_rows,
            x: vec![0.0; n * config.hidden],
            h: vec![0.0; n * config.hidden],
            q: vec![0.0; n * config.q_dim()],
            k: vec![0.0; n * config.kv_dim()],
            v: vec![0.0; n * config.kv_dim()],
            fused: vec![0.0; n * fused],
            attn: vec![0.0; n * attn_width(config)],
            out: vec![0.0; n * config.hidden],
            gate: vec![0.0; n * config.ffn_dim],
            up: vec![0.0; n * config.ffn_dim],
            logits: vec![0.0; logit_rows * config.vocab_size],
            per_layer: vec![0.0; n * per_layer_floats(config)],
            per_layer_gate: vec![0.0; n * per_layer_floats(config)],
            moe: MoeScratch::new(config, n),
            latent: LatentScratch::new(config, n),
            mixer: MixerScratch::new(config, n),
            attn_gate: vec![0.0; usize::from(config.gated_attention) * n * config.q_dim()],
            sources: Vec::with_capacity(n),
            products: Products::new(rinfer_kernels::ActivationBuffer::for_matmul(
                n,
                widest_input(config),
                config
                    .vocab_size
                    .max(fused)
                    .max(config.hidden)
                    .max(per_layer_floats(config))
                    .max(latent_rows(config))
                    .max(MixerScratch::widths(config).0),
            )),
        }
    }
}

/// Per-layer input values of one row: every layer's width (0 without per-layer inputs).
fn per_layer_floats(config: &ModelConfig) -> usize {
    config
        .per_layer_input
        .unwrap_or(0)
        .saturating_mul(config.layers)
}

/// Width of the attention output: the query heads, or latent attention's values when wider.
fn attn_width(config: &ModelConfig) -> usize {
    let values = config.mla.map_or(0, |mla| config.heads * mla.v_head);
    config.q_dim().max(values)
}

/// The widest input of a product the stages run outside the experts.
fn widest_input(config: &ModelConfig) -> usize {
    let shared = config
        .experts
        .and_then(|m| m.shared)
        .map_or(0, |s| s.ffn_dim);
    let latent = config
        .mla
        .map_or(0, |m| m.q_lora.unwrap_or(0).max(m.kv_lora).max(m.nope));
    let mixer = MixerScratch::input_width(config);
    [
        config.hidden,
        config.ffn_dim,
        attn_width(config),
        shared,
        latent,
        mixer,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

/// The most outputs of a latent attention product (0 for other models).
fn latent_rows(config: &ModelConfig) -> usize {
    config.mla.map_or(0, |mla| config.heads * mla.q_head())
}

/// The buffers of latent attention's stages, for `n` rows.
#[derive(Default)]
pub(crate) struct LatentScratch {
    /// The compressed queries `[n, q_lora]`.
    pub(crate) q_lora: Vec<f32>,
    /// The queries as projected `[n, heads · (nope + rope)]`.
    pub(crate) q: Vec<f32>,
    /// `[c | k_pe]` as projected `[n, kv_lora + rope]`.
    pub(crate) kv: Vec<f32>,
    /// One head's `q_nope` of every row `[n, nope]`.
    pub(crate) nope: Vec<f32>,
    /// One head's absorbed query, or its latent output, of every row `[n, kv_lora]`.
    pub(crate) latent: Vec<f32>,
    /// One head's value output of every row `[n, v_head]`.
    pub(crate) value: Vec<f32>,
    /// Every head's value output `[n, heads · v_head]`.
    pub(crate) values: Vec<f32>,
}

impl LatentScratch {
    /// The f32 values per batch row, or `None` on overflow (0 for other models).
    fn floats_per_row(config: &ModelConfig) -> Option<usize> {
        let Some(mla) = config.mla else {
            return Some(0);
        };
        mla.q_lora
            .unwrap_or(0)
            .checked_add(config.heads.checked_mul(mla.q_head())?)?
            .checked_add(mla.latent())?
            .checked_add(mla.nope)?
            .checked_add(mla.kv_lora)?
            .checked_add((config.heads + 1).checked_mul(mla.v_head)?)
    }

    fn new(config: &ModelConfig, n: usize) -> Self {
        let Some(mla) = config.mla else {
            return Self::default();
        };
        Self {
            q_lora: vec![0.0; n * mla.q_lora.unwrap_or(0)],
            q: vec![0.0; n * config.heads * mla.q_head()],
            kv: vec![0.0; n * mla.latent()],
            nope: vec![0.0; n * mla.nope],
            latent: vec![0.0; n * mla.kv_lora],
            value: vec![0.0; n * mla.v_head],
            values: vec![0.0; n * config.heads * mla.v_head],
        }
    }

    fn bytes(&self) -> usize {
        let floats = [
            &self.q_lora,
            &self.q,
            &self.kv,
            &self.nope,
            &self.latent,
            &self.value,
            &self.values,
        ];
        floats.iter().map(|b| b.len() * 4).sum()
    }
}

/// Width of the fused projections' output: q | k | v, gate | up, or gated attention's
/// query | gate.
fn fused_width(config: &ModelConfig) -> usize {
    let qkv = config.q_dim() * (1 + usize::from(config.gated_attention)) + 2 * config.kv_dim();
    qkv.max(2 * config.ffn_dim)
}

/// The buffers of the recurrent mixers, for `n` rows.
#[derive(Default)]
pub(crate) struct MixerScratch {
    /// The input projection `[n, proj]` (delta net: q | k | v; short conv: b | c | u).
    pub(crate) proj: Vec<f32>,
    /// The convolution's input then output `[n, conv]`.
    pub(crate) conv: Vec<f32>,
    /// The convolution's output `[n, conv]`.
    pub(crate) mixed: Vec<f32>,
    /// The delta net's output gate `[n, v_dim]`.
    pub(crate) gate: Vec<f32>,
    /// The delta net's β `[n, v_heads]`.
    pub(crate) beta: Vec<f32>,
    /// The delta net's decay `[n, v_heads]`.
    pub(crate) decay: Vec<f32>,
    /// The delta net's output, head by head `[v_heads, n, state]`, then by row `[n, v_dim]`.
    pub(crate) heads: Vec<f32>,
    /// The delta net's output by row `[n, v_dim]`.
    pub(crate) output: Vec<f32>,
}

impl MixerScratch {
    /// Widths `(proj, conv, v_dim, v_heads)` of the buffers per row.
    fn widths(config: &ModelConfig) -> (usize, usize, usize, usize) {
        use crate::config::Recurrence;
        match config.recurrent.as_ref().map(|r| r.recurrence) {
            None => (0, 0, 0, 0),
            Some(Recurrence::ShortConv(c)) => (3 * c.channels, c.channels, 0, 0),
            Some(Recurrence::DeltaNet(d)) => (d.conv_dim(), d.conv_dim(), d.v_dim(), d.v_heads),
        }
    }

    /// The widest input of a mixer's products.
    fn input_width(config: &ModelConfig) -> usize {
        Self::widths(config).2
    }

    /// The f32 values per batch row, or `None` on overflow.
    fn floats_per_row(config: &ModelConfig) -> Option<usize> {
        let (proj, conv, v_dim, v_heads) = Self::widths(config);
        proj.checked_add(conv.checked_mul(2)?)?
            .checked_add(v_dim.checked_mul(3)?)?
            .checked_add(v_heads.checked_mul(2)?)
    }

    fn new(config: &ModelConfig, n: usize) -> Self {
        let (proj, conv, v_dim, v_heads) = Self::widths(config);
        Self {
            proj: vec![0.0; n * proj],
            conv: vec![0.0; n * conv],
            mixed: vec![0.0; n * conv],
            gate: vec![0.0; n * v_dim],
            beta: vec![0.0; n * v_heads],
            decay: vec![0.0; n * v_heads],
            heads: vec![0.0; n * v_dim],
            output: vec![0.0; n * v_dim],
        }
    }

    fn bytes(&self) -> usize {
        [
            &self.proj,
            &self.conv,
            &self.mixed,
            &self.gate,
            &self.beta,
            &self.decay,
            &self.heads,
            &self.output,
        ]
        .iter()
        .map(|b| b.len() * 4)
        .sum()
    }
}

/// The buffers of the mixture-of-experts stages, for `n` rows routed to `k` experts each.
#[derive(Default)]
pub(crate) struct MoeScratch {
    /// Router scores `[n, experts]`.
    pub(crate) scores: Vec<f32>,
    /// Each row's experts, best first `[n, k]`.
    pub(crate) ids: Vec<u32>,
    /// Their weights `[n, k]`.
    pub(crate) weights: Vec<f32>,
    /// The rows routed to one expert, gathered `[n, hidden]`.
    pub(crate) input: Vec<f32>,
    /// One expert's gate `[n, expert_ffn]`.
    pub(crate) gate: Vec<f32>,
    /// One expert's up `[n, expert_ffn]`.
    pub(crate) up: Vec<f32>,
    /// One expert's output for its rows `[n, hidden]`.
    pub(crate) output: Vec<f32>,
    /// Every (row, slot)'s expert output `[n, k, hidden]`.
    pub(crate) slots: Vec<f32>,
    /// Which (row, slot) pairs one expert serves.
    pub(crate) routed: Vec<(usize, usize)>,
    /// A decode step's gates then ups of its `k` experts `[2, k, expert_ffn]`.
    pub(crate) gate_up: Vec<f32>,
    /// The quantized inputs of a decode step's batched expert products (`k` rows).
    pub(crate) act: rinfer_kernels::ActivationBuffer,
    /// The shared experts' output, or the dense FFN's output set aside while the experts run
    /// beside it (Gemma 4) `[n, hidden]`.
    pub(crate) shared: Vec<f32>,
    /// The shared experts' gate `[n, shared_ffn]`.
    pub(crate) shared_gate: Vec<f32>,
    /// The shared experts' up `[n, shared_ffn]`.
    pub(crate) shared_up: Vec<f32>,
}

impl MoeScratch {
    /// The f32 values per batch row, or `None` on overflow (0 for dense models).
    fn floats_per_row(config: &ModelConfig) -> Option<usize> {
        let Some(moe) = config.experts else {
            return Some(0);
        };
        let k = moe.used;
        let hidden = config.hidden;
        let stash = if moe.dense_beside { hidden } else { 0 };
        let shared = moe.shared.map_or(stash, |s| hidden + 2 * s.ffn_dim);
        // scores, weights (ids counted as f32-sized), input, gate, up, output, slots, shared
        moe.count
            .checked_add(2 * k)?
            .checked_add(2 * hidden)?
            .checked_add(2 * moe.ffn_dim)?
            .checked_add(k.checked_mul(hidden)?)?
            .checked_add(shared)
    }

    fn new(config: &ModelConfig, n: usize) -> Self {
        let Some(moe) = config.experts else {
            return Self::default();
        };
        let (k, hidden) = (moe.used, config.hidden);
        let shared_ffn = moe.shared.map_or(0, |s| s.ffn_dim);
        Self {
            scores: vec![0.0; n * moe.count],
            ids: vec![0; n * k],
            weights: vec![0.0; n * k],
            input: vec![0.0; n * hidden],
            gate: vec![0.0; n * moe.ffn_dim],
            up: vec![0.0; n * moe.ffn_dim],
            output: vec![0.0; n * hidden],
            slots: vec![0.0; n * k * hidden],
            routed: Vec::with_capacity(n * k),
            gate_up: vec![0.0; 2 * k * moe.ffn_dim],
            act: rinfer_kernels::ActivationBuffer::for_matmul(k, hidden.max(moe.ffn_dim), 0),
            shared: vec![
                0.0;
                if moe.shared.is_some() || moe.dense_beside {
                    n * hidden
                } else {
                    0
                }
            ],
            shared_gate: vec![0.0; n * shared_ffn],
            shared_up: vec![0.0; n * shared_ffn],
        }
    }

    fn bytes(&self) -> usize {
        let floats = [
            &self.scores,
            &self.weights,
            &self.input,
            &self.gate,
            &self.up,
            &self.output,
            &self.slots,
            &self.gate_up,
            &self.shared,
            &self.shared_gate,
            &self.shared_up,
        ];
        floats.iter().map(|b| b.len() * 4).sum::<usize>() + self.ids.len() * 4
    }
}

/// Where one row of a batch comes from: its sequence and position.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RowSource {
    pub(crate) seq: usize,
    pub(crate) pos: usize,
}
