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
        ];
        buffers.iter().map(|b| b.len() * 4).sum()
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
            + 2 * config.ffn_dim;
        let rows = n.checked_mul(per_row)?;
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
            sources: Vec::with_capacity(n),
            act: rinfer_kernels::ActivationBuffer::for_matmul(
                n,
                config.hidden.max(config.ffn_dim).max(config.q_dim()),
                config.vocab_size.max(fused).max(config.hidden),
            ),
        }
    }
}

/// Where one row of a batch comes from: its sequence and position.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RowSource {
    pub(crate) seq: usize,
    pub(crate) pos: usize,
}
