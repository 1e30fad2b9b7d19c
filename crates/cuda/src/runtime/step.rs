//! The kernel sequence of one forward step: the GPU twin of `rinfer_model`'s generic block,
//! reading the same configuration fields in the same order.

use crate::error::CudaError;
use crate::host::{FfnKind, Norm};
use crate::launch;
use crate::runtime::buffers::GpuKvCache;
use crate::runtime::launcher::{Arg, launch as run};
use crate::runtime::model::GpuModel;
use crate::runtime::weights::{DeviceLinear, DeviceMatrix, DeviceNorm};

/// The address of element `offset` of an f32 buffer at `base`.
fn at(base: u64, offset: usize) -> u64 {
    base + 4 * offset as u64
}

fn opt(v: Option<u64>) -> Arg {
    Arg::Ptr(v.unwrap_or(0))
}

impl GpuModel {
    /// Embeds `n` tokens (ids and positions already in their device buffers), runs every
    /// layer, and computes the logits of rows `first..first + rows` of the batch into the
    /// logits buffer.
    pub(crate) fn launch_step(
        &self,
        n: usize,
        cache: &GpuKvCache,
        first: usize,
        rows: usize,
    ) -> Result<(), CudaError> {
        self.embed(n)?;
        for layer in 0..self.config.layers {
            self.block(layer, n, cache)?;
        }
        self.head(first, rows)
    }

    /// Greedy token of logits row 0 into the argmax buffer.
    pub(crate) fn launch_argmax(&self) -> Result<(), CudaError> {
        run(
            &self.stream,
            self.kernels.get("argmax"),
            launch::argmax(),
            &[
                Arg::Ptr(self.work.logits.ptr),
                Arg::I32(self.config.vocab_size as i32),
                Arg::Ptr(self.work.argmax.ptr),
            ],
        )
    }

    fn embed(&self, n: usize) -> Result<(), CudaError> {
        let c = &self.config;
        let w = &self.weights;
        let rows = |m: &DeviceMatrix, ids: u64, scale: f32, acc: i32| {
            run(
                &self.stream,
                &m.kernels.get_rows,
                launch::get_rows(n, c.hidden),
                &[
                    Arg::Ptr(m.ptr),
                    Arg::I64(m.row_bytes),
                    Arg::Ptr(ids),
                    Arg::I32(c.hidden as i32),
                    Arg::Ptr(self.work.x.ptr),
                    Arg::I32(c.hidden as i32),
                    Arg::F32(scale),
                    Arg::I32(acc),
                ],
            )
        };
        rows(
            &w.token_embd,
            self.work.tokens.ptr,
            c.embedding_scale.unwrap_or(1.0),
            0,
        )?;
        if let Some(pos) = &w.position_embd {
            rows(pos, self.work.positions.ptr, 1.0, 1)?;
        }
        Ok(())
    }

    /// `out[n, d] = norm(x[n, d])` (`x` and `out` may be the same buffer).
    fn norm(&self, norm: &DeviceNorm, x: u64, out: u64, n: usize) -> Result<(), CudaError> {
        let c = &self.config;
        let d = c.hidden;
        let shape = launch::per_row(n, d);
        match c.norm {
            Norm::Rms => run(
                &self.stream,
                self.kernels.get("rms_norm"),
                shape,
                &[
                    Arg::Ptr(x),
                    Arg::Ptr(out),
                    Arg::Ptr(norm.weight.ptr),
                    Arg::I32(d as i32),
                    Arg::F32(c.norm_eps),
                ],
            ),
            Norm::Layer => run(
                &self.stream,
                self.kernels.get("layer_norm"),
                shape,
                &[
                    Arg::Ptr(x),
                    Arg::Ptr(out),
                    Arg::Ptr(norm.weight.ptr),
                    opt(norm.bias.as_ref().map(|b| b.ptr)),
                    Arg::I32(d as i32),
                    Arg::F32(c.norm_eps),
                ],
            ),
        }
    }

    /// `y[t, out_offset + r] = W[r] · x[t] + b[r]` for `n` tokens; `x` rows are `ldx` apart,
    /// `y` rows `ldy` apart.
    fn linear(
        &self,
        l: &DeviceLinear,
        x: u64,
        ldx: usize,
        y: u64,
        ldy: usize,
        n: usize,
    ) -> Result<(), CudaError> {
        let bias = l.bias.as_ref().map(|b| b.ptr);
        self.matmul(&l.weight, bias, x, ldx, at(y, l.out_offset), ldy, n)
    }

    /// `y[t, r] = W[r] · x[t] + b[r]`: the decode kernel for one token, the batched one
    /// otherwise.
    #[allow(clippy::too_many_arguments)]
    fn matmul(
        &self,
        w: &DeviceMatrix,
        bias: Option<u64>,
        x: u64,
        ldx: usize,
        y: u64,
        ldy: usize,
        n: usize,
    ) -> Result<(), CudaError> {
        let function = if n == 1 {
            &w.kernels.matvec
        } else {
            &w.kernels.matmul
        };
        run(
            &self.stream,
            function,
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
        )
    }

    fn elementwise(&self, name: &'static str, args: &[Arg], len: usize) -> Result<(), CudaError> {
        run(
            &self.stream,
            self.kernels.get(name),
            launch::elementwise(len),
            args,
        )
    }

    fn block(&self, layer: usize, n: usize, cache: &GpuKvCache) -> Result<(), CudaError> {
        let c = &self.config;
        let w = &self.weights.layers[layer];
        let work = &self.work;
        let (hidden, q_dim, kv_dim) = (c.hidden, c.q_dim(), c.kv_dim());
        let width = q_dim + 2 * kv_dim;
        self.norm(&w.attn_norm, work.x.ptr, work.h.ptr, n)?;
        for projection in &w.qkv {
            self.linear(projection, work.h.ptr, hidden, work.qkv.ptr, width, n)?;
        }
        if let Some((q_norm, k_norm)) = &w.qk_norm {
            for (offset, heads, weight) in [(0, c.heads, q_norm), (q_dim, c.kv_heads, k_norm)] {
                run(
                    &self.stream,
                    self.kernels.get("head_rms_norm"),
                    launch::per_head(n, heads),
                    &[
                        Arg::Ptr(work.qkv.ptr),
                        Arg::I32(width as i32),
                        Arg::I32(offset as i32),
                        Arg::Ptr(weight.ptr),
                        Arg::I32(c.head_dim as i32),
                        Arg::F32(c.norm_eps),
                    ],
                )?;
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
                run(
                    &self.stream,
                    self.kernels.get("rope"),
                    launch::rope(n, heads, rope.dims),
                    &[
                        Arg::Ptr(work.qkv.ptr),
                        Arg::I32(width as i32),
                        Arg::I32(offset as i32),
                        Arg::I32(c.head_dim as i32),
                        Arg::I32(rope.dims as i32),
                        Arg::Ptr(work.positions.ptr),
                        Arg::F32(theta_scale),
                        Arg::F32(1.0 / rope.linear_scale),
                        opt(self.weights.rope_freqs.as_ref().map(|f| f.ptr)),
                        Arg::I32(i32::from(rope.neox)),
                    ],
                )?;
            }
        }
        let kv = &cache.layers[layer];
        run(
            &self.stream,
            self.kernels.get("kv_store"),
            launch::per_row(n, kv_dim),
            &[
                Arg::Ptr(work.qkv.ptr),
                Arg::I32(width as i32),
                Arg::I32(q_dim as i32),
                Arg::I32((q_dim + kv_dim) as i32),
                Arg::Ptr(kv.keys.ptr),
                Arg::Ptr(kv.values.ptr),
                Arg::I32(kv_dim as i32),
                Arg::Ptr(work.positions.ptr),
                Arg::I32(kv.slots as i32),
            ],
        )?;
        self.attention(layer, n, cache)?;
        self.linear(
            &w.attn_output,
            work.attn.ptr,
            q_dim,
            work.out.ptr,
            hidden,
            n,
        )?;
        if let Some(post) = &w.post_attn_norm {
            self.norm(post, work.out.ptr, work.out.ptr, n)?;
        }
        let len = n * hidden;
        if c.parallel_block {
            // Attention and FFN both read `h`; the FFN result lands in `h`.
            self.ffn(layer, n)?;
            return self.elementwise(
                "add2_inplace",
                &[
                    Arg::Ptr(work.x.ptr),
                    Arg::Ptr(work.out.ptr),
                    Arg::Ptr(work.h.ptr),
                    Arg::I64(len as i64),
                ],
                len,
            );
        }
        let add = |a: u64| {
            self.elementwise(
                "add_inplace",
                &[Arg::Ptr(work.x.ptr), Arg::Ptr(a), Arg::I64(len as i64)],
                len,
            )
        };
        add(work.out.ptr)?;
        if let Some(ffn_norm) = &w.ffn_norm {
            self.norm(ffn_norm, work.x.ptr, work.h.ptr, n)?;
        }
        self.ffn(layer, n)?;
        if let Some(post) = &w.post_ffn_norm {
            self.norm(post, work.h.ptr, work.h.ptr, n)?;
        }
        add(work.h.ptr)
    }

    /// The feed-forward block from `h`; its output overwrites `h`.
    fn ffn(&self, layer: usize, n: usize) -> Result<(), CudaError> {
        let c = &self.config;
        let w = &self.weights.layers[layer];
        let work = &self.work;
        let (f, hidden) = (c.ffn_dim, c.hidden);
        for projection in &w.ffn_up {
            self.linear(projection, work.h.ptr, hidden, work.gate_up.ptr, 2 * f, n)?;
        }
        let kind = match c.ffn {
            FfnKind::SiluGated => 0,
            FfnKind::GeluGated => 1,
            FfnKind::Gelu => 2,
        };
        self.elementwise(
            "gated_activation",
            &[
                Arg::Ptr(work.gate_up.ptr),
                Arg::I32(f as i32),
                Arg::I32((2 * f) as i32),
                Arg::I32(n as i32),
                Arg::I32(kind),
            ],
            n * f,
        )?;
        self.linear(&w.ffn_down, work.gate_up.ptr, 2 * f, work.h.ptr, hidden, n)
    }

    /// Attention of the `n` new queries over the cache into `attn` `[n, q_dim]`.
    fn attention(&self, layer: usize, n: usize, cache: &GpuKvCache) -> Result<(), CudaError> {
        let c = &self.config;
        let work = &self.work;
        let kv = &cache.layers[layer];
        let width = c.q_dim() + 2 * c.kv_dim();
        let group = c.heads / c.kv_heads;
        let window = c.window_of(layer).unwrap_or(0) as i32;
        let softcap = c.attn_softcap.unwrap_or(0.0);
        if n == 1 {
            let splits = self.plan.splits;
            run(
                &self.stream,
                self.kernels.get("attention_decode"),
                launch::attention_decode(c.heads, &splits),
                &[
                    Arg::Ptr(work.qkv.ptr),
                    Arg::I32(0),
                    Arg::Ptr(kv.keys.ptr),
                    Arg::Ptr(kv.values.ptr),
                    Arg::I32(kv.slots as i32),
                    Arg::I32(c.kv_dim() as i32),
                    Arg::I32(c.head_dim as i32),
                    Arg::I32(group as i32),
                    Arg::Ptr(work.positions.ptr),
                    Arg::I32(window),
                    Arg::F32(c.attention_scale),
                    Arg::F32(softcap),
                    Arg::I32(splits.split_len as i32),
                    Arg::Ptr(work.partials.ptr),
                ],
            )?;
            return run(
                &self.stream,
                self.kernels.get("attention_decode_combine"),
                launch::attention_combine(c.heads, c.head_dim),
                &[
                    Arg::Ptr(work.partials.ptr),
                    Arg::I32(splits.splits as i32),
                    Arg::I32(c.head_dim as i32),
                    Arg::Ptr(work.attn.ptr),
                ],
            );
        }
        run(
            &self.stream,
            self.kernels.get("attention_prefill"),
            launch::attention_prefill(n, c.heads),
            &[
                Arg::Ptr(work.qkv.ptr),
                Arg::I32(width as i32),
                Arg::I32(0),
                Arg::Ptr(kv.keys.ptr),
                Arg::Ptr(kv.values.ptr),
                Arg::I32(kv.slots as i32),
                Arg::I32(c.kv_dim() as i32),
                Arg::I32(c.head_dim as i32),
                Arg::I32(group as i32),
                Arg::Ptr(work.positions.ptr),
                Arg::I32(n as i32),
                Arg::I32(window),
                Arg::F32(c.attention_scale),
                Arg::F32(softcap),
                Arg::Ptr(work.attn.ptr),
                Arg::I32(c.heads as i32),
            ],
        )
    }

    /// Final norm, LM head (with bias) and soft-cap for rows `first..first + rows`.
    fn head(&self, first: usize, rows: usize) -> Result<(), CudaError> {
        let c = &self.config;
        let w = &self.weights;
        let work = &self.work;
        self.norm(
            &w.output_norm,
            at(work.x.ptr, first * c.hidden),
            work.h.ptr,
            rows,
        )?;
        self.matmul(
            &w.lm_head,
            w.output_bias.as_ref().map(|b| b.ptr),
            work.h.ptr,
            c.hidden,
            work.logits.ptr,
            c.vocab_size,
            rows,
        )?;
        if let Some(cap) = c.final_softcap {
            let len = rows * c.vocab_size;
            self.elementwise(
                "softcap",
                &[
                    Arg::Ptr(work.logits.ptr),
                    Arg::I64(len as i64),
                    Arg::F32(cap),
                ],
                len,
            )?;
        }
        Ok(())
    }
}
