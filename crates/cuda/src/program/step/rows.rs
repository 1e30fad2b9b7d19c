//! The launches of a batched decode step that differ from one sequence's: each row stores to
//! and attends over its own KV cache, found through the step's cache tables.

use rinfer_transformer::AttentionParams;

use super::{Sequence, opt};
use crate::launch;
use crate::program::Arg;

impl Sequence<'_, '_> {
    /// Each row's keys and values into its own cache (`keys[i]`, `values[i]` of the layer's
    /// tables) at its position.
    pub(super) fn kv_store_rows(&mut self, (keys, values, slots): (u64, u64, usize)) {
        let c = self.b.model;
        let (q_dim, kv_dim) = (c.q_dim(), c.kv_dim());
        self.fixed(
            "kv_store_rows",
            launch::per_row(self.n, kv_dim),
            &[
                Arg::Ptr(self.b.work.qkv),
                Arg::I32(self.qkv_width() as i32),
                Arg::I32(q_dim as i32),
                Arg::I32((q_dim + kv_dim) as i32),
                Arg::Ptr(keys),
                Arg::Ptr(values),
                Arg::I32(kv_dim as i32),
                Arg::Ptr(self.b.work.positions),
                Arg::I32(slots as i32),
            ],
        );
    }

    /// Split-K decode attention of each row's query over its own cache into `attn`
    /// `[n, q_dim]`.
    pub(super) fn attention_rows(
        &mut self,
        params: &AttentionParams,
        sinks: Option<u64>,
        (keys, values, slots): (u64, u64, usize),
    ) {
        let c = self.b.model;
        let work = *self.b.work;
        let (n, splits) = (self.n, self.b.splits);
        self.fixed(
            "attention_decode_rows",
            launch::attention_decode_rows(c.heads, &splits, n),
            &[
                Arg::Ptr(work.qkv),
                Arg::I32(self.qkv_width() as i32),
                Arg::I32(0),
                Arg::Ptr(keys),
                Arg::Ptr(values),
                Arg::I32(slots as i32),
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
