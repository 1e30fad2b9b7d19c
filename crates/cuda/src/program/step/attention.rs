//! Attention's launches: the prefill kernel over a prompt chunk, split-K decode attention and
//! the merge of its splits, and the arguments they share.

use rinfer_transformer::AttentionParams;

use super::{Recipe, Sequence, masking_args, opt};
use crate::kernels::KvKernel;
use crate::launch;
use crate::program::{Arg, LayerKv};

impl Sequence<'_, '_> {
    /// Attention of the `n` new queries over the cache into `attn` `[n, q_dim]`: the prefill
    /// kernel in a prefill step, split-K decode attention for a decoded token (its output also
    /// quantized to q8_1 when `quantize` says so).
    pub(super) fn attention(
        &mut self,
        params: &AttentionParams,
        sinks: Option<u64>,
        kv: LayerKv,
        quantize: bool,
    ) {
        let c = self.b.model;
        let work = *self.b.work;
        let n = self.n;
        if self.recipe == Recipe::Decode {
            let splits = self.b.splits;
            let shapes = [
                launch::attention_decode(c.heads, &splits),
                launch::attention_combine(c.heads, c.head_dim),
            ];
            let query = [Arg::Ptr(work.qkv), Arg::I32(0)];
            let kernel = (KvKernel::Decode, quantize);
            self.attention_splits(kernel, &query, shapes, params, sinks, kv);
            return;
        }
        let args = [
            &self.query_rows_args()[..],
            &self.cache_args(kv),
            &[Arg::I32(n as i32)],
            &masking_args(params),
            &[opt(sinks), Arg::Ptr(work.attn), Arg::I32(c.heads as i32)],
        ]
        .concat();
        self.fixed(
            self.b.kv.prefill_kernel(c.head_dim),
            launch::attention_prefill(self.b.kv, n, c.heads),
            &args,
        );
    }

    /// The query arguments of the attention kernels over several query rows: the rows (the
    /// `qkv` buffer), their stride and the queries' offset in a row.
    pub(super) fn query_rows_args(&self) -> [Arg; 3] {
        [
            Arg::Ptr(self.b.work.qkv),
            Arg::I32(self.qkv_width() as i32),
            Arg::I32(0),
        ]
    }

    /// The attention kernels' arguments after the query's: the layer's cache (`kv`), its
    /// geometry and the tokens' positions.
    fn cache_args(&self, kv: LayerKv) -> [Arg; 9] {
        let c = self.b.model;
        [
            Arg::Ptr(kv.keys),
            Arg::Ptr(kv.values),
            Arg::Ptr(kv.table),
            Arg::I64(kv.block_stride),
            Arg::I32(kv.slots as i32),
            Arg::I32(c.kv_dim() as i32),
            Arg::I32(c.head_dim as i32),
            Arg::I32((c.heads / c.kv_heads) as i32),
            Arg::Ptr(self.b.work.positions),
        ]
    }

    /// Split-K decode attention with `kernel` of the queries `query` (the kernel's query
    /// arguments) over the cache `kv`, then the merge of its splits into `attn` (`shapes`: the
    /// two launches'), which also quantizes `attn` to the q8_1 buffers when `quantize` says so.
    pub(super) fn attention_splits(
        &mut self,
        (kernel, quantize): (KvKernel, bool),
        query: &[Arg],
        [split_shape, combine_shape]: [launch::LaunchShape; 2],
        params: &AttentionParams,
        sinks: Option<u64>,
        kv: LayerKv,
    ) {
        let c = self.b.model;
        let work = *self.b.work;
        let splits = self.b.splits;
        let args = [
            query,
            &self.cache_args(kv),
            &masking_args(params),
            &[
                Arg::I32(splits.split_len as i32),
                Arg::I32(splits.splits as i32),
                Arg::Ptr(work.partials),
            ],
        ]
        .concat();
        self.fixed(self.b.kv.kernel(kernel), split_shape, &args);
        self.fixed(
            "attention_decode_combine",
            combine_shape,
            &[
                Arg::Ptr(work.partials),
                Arg::I32(splits.splits as i32),
                Arg::I32(c.head_dim as i32),
                opt(sinks),
                Arg::Ptr(work.attn),
                Arg::Ptr(if quantize { work.xq } else { 0 }),
                Arg::Ptr(if quantize { work.xq_meta } else { 0 }),
            ],
        );
        if quantize {
            let q_dim = c.q_dim();
            self.quantized = Some((work.attn, q_dim, q_dim));
        }
    }
}
