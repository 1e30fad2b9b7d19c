//! The attention of a batched decode step, where it differs from one sequence's: each row
//! attends over its own KV cache, found through the step's cache tables.

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
