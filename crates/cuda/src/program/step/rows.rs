//! The batched decode step, where it differs from a prefill step: each row attends over its
//! own KV cache, found through the step's cache tables, and each row is computed as a step of
//! that row alone would compute it, bit for bit, whatever the number of rows. Its rows are
//! sequences' last tokens and the guesses a speculating sequence verifies, whose logits must be
//! those of single-token decoding. The decode recipe keeps to kernels whose per-row arithmetic
//! does not depend on the number of rows:
//!
//! - a product with a q8_1-capable matrix runs the q8_1 matvec in launches of at most
//!   `MMVQ_TOKENS` rows (the one-row and the batched instantiation share the per-row sums:
//!   each row's accumulator takes the same chunks in the same order, then the same warp sum);
//!   never the tensor-core matmul of prefill (bf16 operands);
//! - any other matrix runs the f32 matvec (one row) or batched matmul, which likewise share
//!   each row's sums; experts run per routed slot in the f32 kernels, never on tensor cores;
//! - attention is split-K decode attention per row over the keys up to its own position,
//!   with splits fixed by the plan, so a row of a sequence that feeds several (its last token
//!   and its guesses) attends causally to the rows before it, stored by the same step;
//! - norms, RoPE, activations and routing work row by row.

use rinfer_transformer::AttentionParams;

use super::Sequence;
use crate::kernels::KvKernel;
use crate::launch;
use crate::program::LayerKv;

impl Sequence<'_, '_> {
    /// Split-K decode attention of each row's query over its own cache into `attn`
    /// `[n, q_dim]` (`kv`: the layer's tables of the rows' addresses), also quantized to q8_1
    /// when `quantize` says so.
    pub(super) fn attention_rows(
        &mut self,
        params: &AttentionParams,
        sinks: Option<u64>,
        kv: LayerKv,
        quantize: bool,
    ) {
        let c = self.b.model;
        let (n, splits) = (self.n, self.b.splits);
        let shapes = [
            launch::attention_decode_rows(c.heads, &splits, n),
            launch::attention_combine_rows(c.heads, c.head_dim, n),
        ];
        let query = self.query_rows_args();
        let kernel = (KvKernel::DecodeRows, quantize);
        self.attention_splits(kernel, &query, shapes, params, sinks, kv);
    }
}
