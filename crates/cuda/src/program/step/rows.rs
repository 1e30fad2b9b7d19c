//! The batched decode step, where it differs from one sequence's step: each row attends over
//! its own KV cache, found through the step's cache tables, and each row is computed as a step
//! of that row alone would compute it, bit for bit, whatever the number of rows. Its rows are
//! sequences' last tokens and the guesses a speculating sequence verifies, whose logits must be
//! those of single-token decoding. Where a one-sequence step picks its kernels by the number of
//! tokens, the decode step keeps to kernels whose per-row arithmetic does not depend on it:
//!
//! - a product with a q8_1-capable matrix runs the q8_1 matvec in launches of at most
//!   `MMVQ_TOKENS` rows (the one-row and the batched instantiation share the per-row sums:
//!   each row's accumulator takes the same chunks in the same order, then the same warp sum);
//!   never the tensor-core matmul (bf16 operands) nor the f32 batched one (unquantized
//!   activations), which a batch of more than `MMVQ_TOKENS` rows would pick;
//! - any other matrix runs the f32 matvec (one row) or batched matmul, which likewise share
//!   each row's sums; experts run per routed slot in the f32 kernels, never on tensor cores;
//! - attention is split-K decode attention per row over the keys up to its own position,
//!   with splits fixed by the plan, so a row of a sequence that feeds several (its last token
//!   and its guesses) attends causally to the rows before it, stored by the same step;
//! - norms, RoPE, activations and routing work row by row.

use rinfer_transformer::AttentionParams;

use super::{Sequence, opt};
use crate::kernels::KvKernel;
use crate::launch;
use crate::program::{Arg, LayerKv};

impl Sequence<'_, '_> {
    /// Split-K decode attention of each row's query over its own cache into `attn`
    /// `[n, q_dim]` (`kv`: the layer's tables of the rows' addresses).
    pub(super) fn attention_rows(
        &mut self,
        params: &AttentionParams,
        sinks: Option<u64>,
        kv: LayerKv,
    ) {
        let c = self.b.model;
        let work = *self.b.work;
        let (n, splits) = (self.n, self.b.splits);
        self.fixed(
            self.b.kv.kernel(KvKernel::DecodeRows),
            launch::attention_decode_rows(c.heads, &splits, n),
            &[
                Arg::Ptr(work.qkv),
                Arg::I32(self.qkv_width() as i32),
                Arg::I32(0),
                Arg::Ptr(kv.keys),
                Arg::Ptr(kv.values),
                Arg::Ptr(kv.table),
                Arg::I64(kv.block_stride),
                Arg::I32(kv.slots as i32),
                Arg::I32(c.kv_dim() as i32),
                Arg::I32(c.head_dim as i32),
                Arg::I32((c.heads / c.kv_heads) as i32),
                Arg::Ptr(work.positions),
                Arg::I32(params.window.unwrap_or(0) as i32),
                Arg::F32(params.scale),
                Arg::F32(params.softcap.unwrap_or(0.0)),
                Arg::I32(splits.split_len as i32),
                Arg::Ptr(work.partials),
            ],
        );
        self.fixed(
            "attention_decode_combine",
            launch::attention_combine_rows(c.heads, c.head_dim, n),
            &[
                Arg::Ptr(work.partials),
                Arg::I32(splits.splits as i32),
                Arg::I32(c.head_dim as i32),
                opt(sinks),
                Arg::Ptr(work.attn),
            ],
        );
    }
}
