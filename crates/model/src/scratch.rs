//! Activation buffers for one forward call, sized once for the largest batch.

use crate::config::ModelConfig;

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
    /// Sequence and position of every row of the batch.
    pub(crate) sources: Vec<RowSource>,
    /// The quantized-activation buffer of the matmul kernels.
    pub(crate) act: rinfer_kernels::ActivationBuffer,
}

impl Scratch {
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
        buffers.iter().map(|b| b.len() * 4).sum::<usize>() + self.moe.bytes()
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
        let fused = (config.q_dim() + 2 * config.kv_dim()).max(2 * config.ffn_dim);
        let per_row = 3 * config.hidden
            + 2 * config.q_dim()
            + 2 * config.kv_dim()
            + fused
            + 2 * config.ffn_dim
            + per_layer_floats(config).checked_mul(2)?;
        let rows = n.checked_mul(per_row.checked_add(MoeScratch::floats_per_row(config)?)?)?;
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
        let fused = (config.q_dim() + 2 * config.kv_dim()).max(2 * config.ffn_dim);
        Self {
            max_batch: n,
            max_logit_rows: logit_rows,
            x: vec![0.0; n * config.hidden],
            h: vec![0.0; n * config.hidden],
            q: vec![0.0; n * config.q_dim()],
            k: vec![0.0; n * config.kv_dim()],
            v: vec![0.0; n * config.kv_dim()],
            fused: vec![0.0; n * fused],
            attn: vec![0.0; n * config.q_dim()],
            out: vec![0.0; n * config.hidden],
            gate: vec![0.0; n * config.ffn_dim],
            up: vec![0.0; n * config.ffn_dim],
            logits: vec![0.0; logit_rows * config.vocab_size],
            per_layer: vec![0.0; n * per_layer_floats(config)],
            per_layer_gate: vec![0.0; n * per_layer_floats(config)],
            moe: MoeScratch::new(config, n),
            sources: Vec::with_capacity(n),
            act: rinfer_kernels::ActivationBuffer::for_matmul(
                n,
                config.hidden.max(config.ffn_dim).max(config.q_dim()),
                config
                    .vocab_size
                    .max(fused)
                    .max(config.hidden)
                    .max(per_layer_floats(config)),
            ),
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
}

impl MoeScratch {
    /// The f32 values per batch row, or `None` on overflow (0 for dense models).
    fn floats_per_row(config: &ModelConfig) -> Option<usize> {
        let Some(moe) = config.experts else {
            return Some(0);
        };
        let k = moe.used;
        let hidden = config.hidden;
        // scores, weights (ids counted as f32-sized), input, gate, up, output, slots
        moe.count
            .checked_add(2 * k)?
            .checked_add(2 * hidden)?
            .checked_add(2 * moe.ffn_dim)?
            .checked_add(k.checked_mul(hidden)?)
    }

    fn new(config: &ModelConfig, n: usize) -> Self {
        let Some(moe) = config.experts else {
            return Self::default();
        };
        let (k, hidden) = (moe.used, config.hidden);
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
