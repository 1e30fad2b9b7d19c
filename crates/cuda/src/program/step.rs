//! The kernel sequence of one forward step: the GPU twin of `rinfer_model`'s generic block,
//! reading the same configuration fields in the same order.

use crate::host::{FfnKind, GpuConfig, Norm};
use crate::launch::{self, DecodeSplits};
use crate::program::{
    Arg, CacheAddresses, KernelRef, Launch, LinearAddress, MatrixAddress, NormAddress,
    WeightAddresses, WorkAddresses,
};

/// The address of element `offset` of an f32 buffer at `base`.
fn at(base: u64, offset: usize) -> u64 {
    base + 4 * offset as u64
}

fn opt(v: Option<u64>) -> Arg {
    Arg::Ptr(v.unwrap_or(0))
}

/// Builds the launches of forward steps for one model.
pub struct StepBuilder<'a> {
    /// The configuration.
    pub config: &'a GpuConfig,
    /// Where the weights are.
    pub weights: &'a WeightAddresses,
    /// Where the activation buffers are.
    pub work: &'a WorkAddresses,
    /// Decode attention's split of the keys.
    pub splits: DecodeSplits,
}

impl StepBuilder<'_> {
    /// Appends to `out` the launches that embed `n` tokens (ids and positions already in their
    /// buffers), run every layer over `cache`, and compute the logits of rows
    /// `first..first + rows` of the batch into the logits buffer. One token (`n == 1`) uses
    /// the decode kernels and ends with the argmax of its logits.
    pub fn step(
        &self,
        n: usize,
        cache: &CacheAddresses,
        first: usize,
        rows: usize,
        out: &mut Vec<Launch>,
    ) {
        let mut s = Sequence { b: self, out, n };
        s.embed();
        for layer in 0..self.config.layers {
            s.block(layer, cache);
        }
        s.head(first, rows);
        if n == 1 {
            s.out.push(self.argmax());
        }
    }

    /// The argmax of logits row 0 into the argmax buffer.
    pub fn argmax(&self) -> Launch {
        Launch::new(
            KernelRef::Fixed("argmax"),
            launch::argmax(),
            &[
                Arg::Ptr(self.work.logits),
                Arg::I32(self.config.vocab_size as i32),
                Arg::Ptr(self.work.argmax),
            ],
        )
    }
}

/// The launches of one step being appended.
struct Sequence<'b, 'a> {
    b: &'b StepBuilder<'a>,
    out: &'b mut Vec<Launch>,
    n: usize,
}

impl Sequence<'_, '_> {
    fn push(&mut self, kernel: KernelRef, shape: launch::LaunchShape, args: &[Arg]) {
        self.out.push(Launch::new(kernel, shape, args));
    }

    fn fixed(&mut self, name: &'static str, shape: launch::LaunchShape, args: &[Arg]) {
        self.push(KernelRef::Fixed(name), shape, args);
    }

    fn embed(&mut self) {
        let c = self.b.config;
        let w = self.b.weights;
        let work = self.b.work;
        let lookups = [
            Some((
                w.token_embd,
                work.tokens,
                c.embedding_scale.unwrap_or(1.0),
                0,
            )),
            w.position_embd.map(|m| (m, work.positions, 1.0, 1)),
        ];
        for (m, ids, scale, accumulate) in lookups.into_iter().flatten() {
            self.push(
                KernelRef::GetRows(m.ty),
                launch::get_rows(self.n, c.hidden),
                &[
                    Arg::Ptr(m.ptr),
                    Arg::I64(m.row_bytes),
                    Arg::Ptr(ids),
                    Arg::I32(c.hidden as i32),
                    Arg::Ptr(work.x),
                    Arg::I32(c.hidden as i32),
                    Arg::F32(scale),
                    Arg::I32(accumulate),
                ],
            );
        }
    }

    /// `out[rows, d] = norm(x[rows, d])` (`x` and `out` may be the same buffer).
    fn norm(&mut self, norm: &NormAddress, x: u64, out: u64, rows: usize) {
        let c = self.b.config;
        let d = c.hidden;
        let shape = launch::per_row(rows, d);
        match c.norm {
            Norm::Rms => self.fixed(
                "rms_norm",
                shape,
                &[
                    Arg::Ptr(x),
                    Arg::Ptr(out),
                    Arg::Ptr(norm.weight),
                    Arg::I32(d as i32),
                    Arg::F32(c.norm_eps),
                ],
            ),
            Norm::Layer => self.fixed(
                "layer_norm",
                shape,
                &[
                    Arg::Ptr(x),
                    Arg::Ptr(out),
                    Arg::Ptr(norm.weight),
                    opt(norm.bias),
                    Arg::I32(d as i32),
                    Arg::F32(c.norm_eps),
                ],
            ),
        }
    }

    /// `y[t, out_offset + r] = W[r] · x[t] + b[r]` for `n` tokens.
    fn linear(&mut self, l: &LinearAddress, x: u64, ldx: usize, y: u64, ldy: usize) {
        let n = self.n;
        self.matmul(&l.matrix, l.bias, x, ldx, at(y, l.out_offset), ldy, n);
    }

    /// `y[t, r] = W[r] · x[t] + b[r]`: the decode kernel for one token, the batched one
    /// otherwise.
    #[allow(clippy::too_many_arguments)]
    fn matmul(
        &mut self,
        w: &MatrixAddress,
        bias: Option<u64>,
        x: u64,
        ldx: usize,
        y: u64,
        ldy: usize,
        n: usize,
    ) {
        let kernel = if n == 1 {
            KernelRef::Matvec(w.ty)
        } else {
            KernelRef::Matmul(w.ty)
        };
        self.push(
            kernel,
            launch::matmul(w.rows, n),
            &[
                Arg::Ptr(w.ptr),
                Arg::I64(w.row_bytes),
                Arg::Ptr(x),
                Arg::I32(ldx as i32),
                Arg::Ptr(y),
                Arg::I32(ldy as i32),
                opt(bias),
                Arg::I32(w.rows as i32),
                Arg::I32(w.cols as i32),
                Arg::I32(n as i32),
            ],
        );
    }

    fn elementwise(&mut self, name: &'static str, args: &[Arg], len: usize) {
        self.fixed(name, launch::elementwise(len), args);
    }

    fn block(&mut self, layer: usize, cache: &CacheAddresses) {
        let c = self.b.config;
        let w = &self.b.weights.layers[layer];
        let work = *self.b.work;
        let n = self.n;
        let (hidden, q_dim, kv_dim) = (c.hidden, c.q_dim(), c.kv_dim());
        let width = q_dim + 2 * kv_dim;
        self.norm(&w.attn_norm, work.x, work.h, n);
        for projection in &w.qkv {
            self.linear(projection, work.h, hidden, work.qkv, width);
        }
        if let Some((q_norm, k_norm)) = w.qk_norm {
            for (offset, heads, weight) in [(0, c.heads, q_norm), (q_dim, c.kv_heads, k_norm)] {
                self.fixed(
                    "head_rms_norm",
                    launch::per_head(n, heads),
                    &[
                        Arg::Ptr(work.qkv),
                        Arg::I32(width as i32),
                        Arg::I32(offset as i32),
                        Arg::Ptr(weight),
                        Arg::I32(c.head_dim as i32),
                        Arg::F32(c.norm_eps),
                    ],
                );
            }
        }
        let window = c.window_of(layer);
        if let Some(rope) = c.rope {
            let base = if window.is_some() {
                rope.base_local
            } else {
                rope.base
            };
            let theta_scale = base.powf(-2.0 / rope.dims as f32);
            for (offset, heads) in [(0, c.heads), (q_dim, c.kv_heads)] {
                self.fixed(
                    "rope",
                    launch::rope(n, heads, rope.dims),
                    &[
                        Arg::Ptr(work.qkv),
                        Arg::I32(width as i32),
                        Arg::I32(offset as i32),
                        Arg::I32(c.head_dim as i32),
                        Arg::I32(rope.dims as i32),
                        Arg::Ptr(work.positions),
                        Arg::F32(theta_scale),
                        Arg::F32(1.0 / rope.linear_scale),
                        opt(self.b.weights.rope_freqs),
                        Arg::I32(i32::from(rope.neox)),
                    ],
                );
            }
        }
        let (keys, values, slots) = cache.layers[layer];
        self.fixed(
            "kv_store",
            launch::per_row(n, kv_dim),
            &[
                Arg::Ptr(work.qkv),
                Arg::I32(width as i32),
                Arg::I32(q_dim as i32),
                Arg::I32((q_dim + kv_dim) as i32),
                Arg::Ptr(keys),
                Arg::Ptr(values),
                Arg::I32(kv_dim as i32),
                Arg::Ptr(work.positions),
                Arg::I32(slots as i32),
            ],
        );
        self.attention(layer, (keys, values, slots));
        self.linear(&w.attn_output, work.attn, q_dim, work.out, hidden);
        if let Some(post) = &w.post_attn_norm {
            self.norm(post, work.out, work.out, n);
        }
        let len = n * hidden;
        if c.parallel_block {
            // Attention and FFN both read `h`; the FFN result lands in `h`.
            self.ffn(layer);
            self.elementwise(
                "add2_inplace",
                &[
                    Arg::Ptr(work.x),
                    Arg::Ptr(work.out),
                    Arg::Ptr(work.h),
                    Arg::I64(len as i64),
                ],
                len,
            );
            return;
        }
        let add = [Arg::Ptr(work.x), Arg::Ptr(work.out), Arg::I64(len as i64)];
        self.elementwise("add_inplace", &add, len);
        if let Some(ffn_norm) = &w.ffn_norm {
            self.norm(ffn_norm, work.x, work.h, n);
        }
        self.ffn(layer);
        if let Some(post) = &w.post_ffn_norm {
            self.norm(post, work.h, work.h, n);
        }
        let add = [Arg::Ptr(work.x), Arg::Ptr(work.h), Arg::I64(len as i64)];
        self.elementwise("add_inplace", &add, len);
    }

    /// The feed-forward block from `h`; its output overwrites `h`.
    fn ffn(&mut self, layer: usize) {
        let c = self.b.config;
        let w = &self.b.weights.layers[layer];
        let work = *self.b.work;
        let (f, hidden, n) = (c.ffn_dim, c.hidden, self.n);
        for projection in &w.ffn_up {
            self.linear(projection, work.h, hidden, work.gate_up, 2 * f);
        }
        let kind = match c.ffn {
            FfnKind::SiluGated => 0,
            FfnKind::GeluGated => 1,
            FfnKind::Gelu => 2,
        };
        self.elementwise(
            "gated_activation",
            &[
                Arg::Ptr(work.gate_up),
                Arg::I32(f as i32),
                Arg::I32((2 * f) as i32),
                Arg::I32(n as i32),
                Arg::I32(kind),
            ],
            n * f,
        );
        self.linear(&w.ffn_down, work.gate_up, 2 * f, work.h, hidden);
    }

    /// Attention of the `n` new queries over the cache into `attn` `[n, q_dim]`.
    fn attention(&mut self, layer: usize, (keys, values, slots): (u64, u64, usize)) {
        let c = self.b.config;
        let work = *self.b.work;
        let n = self.n;
        let width = c.q_dim() + 2 * c.kv_dim();
        let group = c.heads / c.kv_heads;
        let window = c.window_of(layer).unwrap_or(0) as i32;
        let softcap = c.attn_softcap.unwrap_or(0.0);
        if n == 1 {
            let splits = self.b.splits;
            self.fixed(
                "attention_decode",
                launch::attention_decode(c.heads, &splits),
                &[
                    Arg::Ptr(work.qkv),
                    Arg::I32(0),
                    Arg::Ptr(keys),
                    Arg::Ptr(values),
                    Arg::I32(slots as i32),
                    Arg::I32(c.kv_dim() as i32),
                    Arg::I32(c.head_dim as i32),
                    Arg::I32(group as i32),
                    Arg::Ptr(work.positions),
                    Arg::I32(window),
                    Arg::F32(c.attention_scale),
                    Arg::F32(softcap),
                    Arg::I32(splits.split_len as i32),
                    Arg::Ptr(work.partials),
                ],
            );
            self.fixed(
                "attention_decode_combine",
                launch::attention_combine(c.heads, c.head_dim),
                &[
                    Arg::Ptr(work.partials),
                    Arg::I32(splits.splits as i32),
                    Arg::I32(c.head_dim as i32),
                    Arg::Ptr(work.attn),
                ],
            );
            return;
        }
        self.fixed(
            "attention_prefill",
            launch::attention_prefill(n, c.heads),
            &[
                Arg::Ptr(work.qkv),
                Arg::I32(width as i32),
                Arg::I32(0),
                Arg::Ptr(keys),
                Arg::Ptr(values),
                Arg::I32(slots as i32),
                Arg::I32(c.kv_dim() as i32),
                Arg::I32(c.head_dim as i32),
                Arg::I32(group as i32),
                Arg::Ptr(work.positions),
                Arg::I32(n as i32),
                Arg::I32(window),
                Arg::F32(c.attention_scale),
                Arg::F32(softcap),
                Arg::Ptr(work.attn),
                Arg::I32(c.heads as i32),
            ],
        );
    }

    /// Final norm, LM head (with bias) and soft-cap for rows `first..first + rows`.
    fn head(&mut self, first: usize, rows: usize) {
        let c = self.b.config;
        let w = self.b.weights;
        let work = *self.b.work;
        self.norm(&w.output_norm, at(work.x, first * c.hidden), work.h, rows);
        self.matmul(
            &w.lm_head,
            w.output_bias,
            work.h,
            c.hidden,
            work.logits,
            c.vocab_size,
            rows,
        );
        if let Some(cap) = c.final_softcap {
            let len = rows * c.vocab_size;
            self.elementwise(
                "softcap",
                &[Arg::Ptr(work.logits), Arg::I64(len as i64), Arg::F32(cap)],
                len,
            );
        }
    }
}
