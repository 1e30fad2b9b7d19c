//! The kernel sequence of one forward step: walks the stages of every block of the
//! transformer (the tree the CPU forward pass walks too, here with device addresses) and emits
//! their launches.
//!
//! Each step follows one of two recipes, chosen by what its tokens are, never by how many there
//! are ([`Recipe`]), so that a token's logits and keys do not depend on the company it is
//! computed in:
//!
//! - a prefill step ([`StepBuilder::prefill`]) computes prompt tokens of one sequence: every
//!   quantized matrix on tensor cores, the experts grouped by expert, attention by the prefill
//!   kernels, whose key tiles sit at absolute positions. A prompt token therefore gets the same
//!   bits whether the prompt runs in one step or in chunks of any size, down to one token: a
//!   prompt found in the prefix cache (whose last token is computed again) equals a cold run;
//! - a decode step ([`StepBuilder::decode`], [`StepBuilder::decode_token`]) computes each row
//!   as a step of that row alone would, bit for bit, whatever the number of rows (how: the
//!   `rows` module).
//!
//! Either takes few launches: a residual add runs in the launch of the RMSNorm that follows
//! it, which in a decode step also quantizes its output for the q8_1 products after it; q and
//! k rotate in one launch; and a decode step's products of one type share launches (the
//! `q8_1` module). Each fused launch computes the bits of the launches it replaces.

use rinfer_transformer::{
    AttentionParams, Experts, Ffn, FfnUp, Gating, Linear, NormKind, NormWeights, Qkv, RopeParams,
    RopeStyle, Router, Stage, Yarn,
};

use crate::kernels::{GpuType, KvElement, KvKernel};
use crate::launch::{self, DecodeSplits};
use crate::program::{
    Arg, CacheAddresses, CacheTables, KernelRef, Launch, LayerKv, MatrixAddress, OnDevice,
    StackedAddress, WeightAddresses, WorkAddresses,
};

mod attention;
mod q8_1;
mod rows;

/// The address of element `offset` of an f32 buffer at `base`.
fn at(base: u64, offset: usize) -> u64 {
    base + 4 * offset as u64
}

fn opt(v: Option<u64>) -> Arg {
    Arg::Ptr(v.unwrap_or(0))
}

/// The attention kernels' sliding window (0: none), scale and soft-cap (0: none).
fn masking_args(params: &AttentionParams) -> [Arg; 3] {
    [
        Arg::I32(params.window.unwrap_or(0) as i32),
        Arg::F32(params.scale),
        Arg::F32(params.softcap.unwrap_or(0.0)),
    ]
}

/// The activation kernels' code for `ffn` (`ACT_*` in `elementwise.cu`).
fn activation_kind(ffn: Ffn) -> i32 {
    match ffn {
        Ffn::SiluGated => 0,
        Ffn::GeluGated => 1,
        Ffn::Gelu => 2,
        Ffn::ClampedSwiGlu => 3,
    }
}

/// How a step computes its tokens: chosen by what they are, the same for any number of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recipe {
    /// Prompt tokens of one sequence: quantized matrices on tensor cores (bf16 operands, f32
    /// sums), the others by the f32 kernels; experts grouped by expert; prefill attention.
    Prefill,
    /// Decoded tokens, each as decoding it alone: q8_1 matvecs in launches of at most
    /// `MMVQ_TOKENS` rows, the f32 kernels for other matrices and for experts (per routed
    /// slot); split-K decode attention.
    Decode,
}

/// Builds the launches of forward steps for one model.
pub struct StepBuilder<'a> {
    /// What the step runs, with where its weights are.
    pub model: &'a WeightAddresses,
    /// Where the activation buffers are.
    pub work: &'a WorkAddresses,
    /// Decode attention's split of the keys.
    pub splits: DecodeSplits,
    /// The element type of the KV caches the step reads and writes.
    pub kv: KvElement,
}

impl StepBuilder<'_> {
    /// Appends to `out` the launches that embed `n` ≥ 1 prompt tokens (ids and positions
    /// already in their buffers), run every layer over `cache`, and compute the logits of rows
    /// `first..first + rows` of the batch into the logits buffer, by the prefill recipe: each
    /// token's results are the same whatever `n` and wherever the prompt was cut into steps.
    pub fn prefill(
        &self,
        n: usize,
        cache: &CacheAddresses,
        first: usize,
        rows: usize,
        out: &mut Vec<Launch>,
    ) {
        self.append(n, Caches::One(cache), Recipe::Prefill, (first, rows), out);
    }

    /// Appends to `out` the launches that decode one token (id and position already in their
    /// buffers) over `cache`, ending with the argmax of its logits: the same logits as the
    /// token's row in a [`decode`](Self::decode) step.
    pub fn decode_token(&self, cache: &CacheAddresses, out: &mut Vec<Launch>) {
        self.append(1, Caches::One(cache), Recipe::Decode, (0, 1), out);
        out.push(self.argmax());
    }

    /// Appends to `out` the launches of one decode step of `n` rows (ids and positions
    /// already in their buffers), every row storing its keys and values at its position in
    /// its KV cache and attending to that cache up to its position, the caches found through
    /// `tables` (rows `0..n` filled in; several rows may name one cache at successive
    /// positions); the logits of row `i` go to row `i` of the logits buffer. Every kernel
    /// computes each row on its own in a fixed order, the same for any `n` (see the module
    /// docs), so a row's logits do not depend on how many rows share the step, which they are,
    /// nor their order.
    pub fn decode(&self, n: usize, tables: &CacheTables, out: &mut Vec<Launch>) {
        self.append(n, Caches::Rows(tables), Recipe::Decode, (0, n), out);
    }

    /// Appends to `out` the launches of a step of `n` rows over `caches` by `recipe`, with the
    /// head for rows `first..first + rows`.
    fn append(
        &self,
        n: usize,
        caches: Caches,
        recipe: Recipe,
        (first, rows): (usize, usize),
        out: &mut Vec<Launch>,
    ) {
        let mut s = Sequence {
            b: self,
            out,
            n,
            quantized: None,
            recipe,
            residual: None,
        };
        s.embed();
        for layer in 0..self.model.layers() {
            s.block(layer, caches);
        }
        s.head(first, rows);
    }

    /// The argmax of logits row 0 into the argmax buffer.
    pub fn argmax(&self) -> Launch {
        Launch::new(
            KernelRef::Fixed("argmax"),
            launch::argmax(),
            &[
                Arg::Ptr(self.work.logits),
                Arg::I32(self.model.vocab_size as i32),
                Arg::Ptr(self.work.argmax),
            ],
        )
    }
}

/// The KV caches a step stores to and attends over.
#[derive(Clone, Copy)]
enum Caches<'c> {
    /// One sequence's: the step's rows are its tokens.
    One(&'c CacheAddresses),
    /// One sequence per row, each through the tables.
    Rows(&'c CacheTables),
}

/// The launches of one step being appended.
struct Sequence<'b, 'a> {
    b: &'b StepBuilder<'a>,
    out: &'b mut Vec<Launch>,
    n: usize,
    /// The activations `(x, ldx, cols)` whose q8_1 codes the q8_1 buffers hold: set by a
    /// quantization, kept while only q8_1 matvecs (which do not write their input) follow.
    quantized: Option<(u64, usize, usize)>,
    /// How its tokens are computed.
    recipe: Recipe,
    /// A residual `x += r` not yet launched: the buffer `r`, added by the next norm of `x`
    /// in its launch (`add_rms_norm`), or on its own before any other stage.
    residual: Option<u64>,
}

impl Sequence<'_, '_> {
    fn push(&mut self, kernel: KernelRef, shape: launch::LaunchShape, args: &[Arg]) {
        if !matches!(
            kernel,
            KernelRef::MatvecQ8_1(_) | KernelRef::MatvecBatchQ8_1(_)
        ) {
            self.quantized = None;
        }
        self.out.push(Launch::new(kernel, shape, args));
    }

    fn fixed(&mut self, name: &'static str, shape: launch::LaunchShape, args: &[Arg]) {
        self.push(KernelRef::Fixed(name), shape, args);
    }

    fn embed(&mut self) {
        let c = self.b.model;
        let work = self.b.work;
        let lookups = [
            Some((
                c.token_embd,
                work.tokens,
                c.embedding_scale.unwrap_or(1.0),
                0,
            )),
            c.position_embd.map(|m| (m, work.positions, 1.0, 1)),
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
        if let Some(norm) = &c.embedding_norm {
            self.norm(norm, work.x, work.h, self.n);
            self.norm(norm, work.x, work.x, self.n);
        }
    }

    /// `h = norm(x)` for the step's rows, the residual waiting to be added to `x` added first;
    /// `h` then quantized to q8_1 where `quantize` says the products after it read it so. An
    /// RMSNorm does all three in one launch.
    fn norm_x(&mut self, weights: &NormWeights<OnDevice>, quantize: bool) {
        let (work, d, n) = (*self.b.work, self.b.model.hidden, self.n);
        let rms = weights.params.kind == NormKind::Rms;
        if !rms || (self.residual.is_none() && !quantize) {
            self.add_residual();
            self.norm(weights, work.x, work.h, n);
            return;
        }
        let (xq, meta) = if quantize {
            (work.xq, work.xq_meta)
        } else {
            (0, 0)
        };
        let residual = self.residual.take().unwrap_or(0);
        self.fixed(
            "add_rms_norm",
            launch::per_row(n, d),
            &[
                Arg::Ptr(work.x),
                Arg::Ptr(residual),
                Arg::Ptr(work.h),
                Arg::Ptr(weights.weight),
                Arg::I32(d as i32),
                Arg::F32(weights.params.eps),
                Arg::Ptr(xq),
                Arg::Ptr(meta),
            ],
        );
        if quantize {
            self.quantized = Some((work.h, d, d));
        }
    }

    /// Whether the products of `stage` (the one after a norm of `x`, or after attention) read
    /// their input as q8_1 rows in one launch: their first matrix's does, in a decode step of
    /// at most `MMVQ_TOKENS` rows (the q8_1 buffers hold that many).
    fn reads_q8_1(&self, stage: Option<&Stage<OnDevice>>) -> bool {
        if self.n > launch::MMVQ_TOKENS as usize {
            return false;
        }
        let first = match stage {
            Some(Stage::Qkv(Qkv::Separate { q, .. })) => q,
            Some(Stage::Qkv(Qkv::Fused(l))) => l,
            Some(Stage::Ffn { up, .. }) => match up {
                FfnUp::Gated { gate, .. } => gate,
                FfnUp::FusedGated(l) | FfnUp::Plain(l) => l,
            },
            Some(Stage::Router { scores, .. }) => scores,
            Some(Stage::AttentionOutput(output)) => output,
            _ => return false,
        };
        self.on_q8_1(&first.weight)
    }

    /// Launches the residual add waiting, if any.
    fn add_residual(&mut self) {
        if let Some(r) = self.residual.take() {
            let x = self.b.work.x;
            self.add(&[x, r], self.n * self.b.model.hidden);
        }
    }

    /// `out[rows, d] = norm(x[rows, d])` (`x` and `out` may be the same buffer).
    fn norm(&mut self, weights: &NormWeights<OnDevice>, x: u64, out: u64, rows: usize) {
        let (norm, d) = (weights.params, self.b.model.hidden);
        // LayerNorm takes its bias after the weights; RMSNorm has none.
        let bias = [opt(weights.bias)];
        let (kernel, bias) = match norm.kind {
            NormKind::Rms => ("rms_norm", &bias[..0]),
            NormKind::Layer => ("layer_norm", &bias[..]),
        };
        let args = [
            &[Arg::Ptr(x), Arg::Ptr(out), Arg::Ptr(weights.weight)][..],
            bias,
            &[Arg::I32(d as i32), Arg::F32(norm.eps)],
        ]
        .concat();
        self.fixed(kernel, launch::per_row(rows, d), &args);
    }

    /// `y[t, r] = W[r] · x[t] + b[r]` for `n` tokens (`y` may point into a wider row).
    fn linear(&mut self, l: &Linear<OnDevice>, x: u64, ldx: usize, y: u64, ldy: usize) {
        let n = self.n;
        self.matmul(&l.weight, l.bias, x, ldx, y, ldy, n);
    }

    /// `y[t, r] = W[r] · x[t] + b[r]` for `n` tokens, by the step's recipe: in a prefill step
    /// the tensor-core kernel for a quantized matrix; in a decode step the integer matvec over
    /// the q8_1 codes of `x` (quantized once for every matrix that reads it), in launches of up
    /// to `MMVQ_TOKENS` rows; otherwise the f32 kernels (the one-token and the batched one
    /// share each row's sums).
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
        if self.on_q8_1(w) {
            self.q8_1_products(&[(w, bias)], (x, ldx), (y, ldy), n);
            return;
        }
        let (kernel, shape) = if self.on_tensor_cores(w.ty, w.ptr) {
            (KernelRef::Mma(w.ty), launch::mma(w.rows, n))
        } else if n == 1 {
            (KernelRef::Matvec(w.ty), launch::matmul(w.rows, n))
        } else {
            (KernelRef::Matmul(w.ty), launch::matmul(w.rows, n))
        };
        let input = [Arg::Ptr(x), Arg::I32(ldx as i32)];
        self.push(kernel, shape, &w.product_args(&input, (y, ldy), bias, n));
    }

    fn elementwise(&mut self, name: &'static str, args: &[Arg], len: usize) {
        self.fixed(name, launch::elementwise(len), args);
    }

    /// The launches of layer `layer`'s stages.
    fn block(&mut self, layer: usize, caches: Caches<'_>) {
        let c = self.b.model;
        let block = &c.blocks[layer];
        let work = *self.b.work;
        let n = self.n;
        let len = n * c.hidden;
        for (i, stage) in block.stages.iter().enumerate() {
            if !matches!(stage, Stage::AttentionNorm(_) | Stage::FfnNorm(_)) {
                self.add_residual();
            }
            match stage {
                Stage::AttentionNorm(norm) | Stage::FfnNorm(norm) => {
                    self.norm_x(norm, self.reads_q8_1(block.stages.get(i + 1)));
                }
                Stage::Qkv(qkv) => {
                    let (h, width) = (c.hidden, self.qkv_width());
                    match qkv {
                        Qkv::Separate { q, k, v } => {
                            self.adjacent_linears(&[q, k, v], (work.h, h), (work.qkv, width));
                        }
                        Qkv::Fused(qkv) => self.linear(qkv, work.h, h, work.qkv, width),
                        // Refused by `UploadPlan::new` (`check_stages`).
                        Qkv::OptionalValue { .. }
                        | Qkv::GatedQuery { .. }
                        | Qkv::QueryOnly { .. } => {}
                    }
                }
                // The upload plan refuses the recurrent stages and gated attention
                // (`check_stages`), so no step is built for them.
                Stage::AttentionGate | Stage::ShortConv { .. } | Stage::DeltaNet { .. } => {}
                Stage::QkNorm { eps, q, k } => self.qk_norm((*q, *k), *eps),
                Stage::Rope(rope) => self.rope(rope),
                Stage::Attention { params, sinks } => {
                    // Decode attention's merge quantizes its output for the output projection.
                    let quantize =
                        c.head_dim.is_multiple_of(32) && self.reads_q8_1(block.stages.get(i + 1));
                    match caches {
                        Caches::One(cache) => {
                            self.kv_store(KvKernel::Store, cache.layers[layer]);
                            self.attention(params, *sinks, cache.layers[layer], quantize);
                        }
                        Caches::Rows(tables) => {
                            self.kv_store(KvKernel::StoreRows, tables.layer(layer));
                            self.attention_rows(params, *sinks, tables.layer(layer), quantize);
                        }
                    }
                }
                Stage::AttentionOutput(output) => {
                    self.linear(output, work.attn, c.q_dim(), work.out, c.hidden);
                }
                Stage::PostAttentionNorm(norm) => self.norm(norm, work.out, work.out, n),
                Stage::AttentionResidual => self.residual = Some(work.out),
                Stage::Ffn { ffn, up, down } => self.ffn(*ffn, up, down),
                Stage::Router { router, scores, .. } => self.route(router, scores),
                // `UploadPlan::new` refuses the stages the GPU does not run yet (see
                // `plan::check_stages`), so a step never meets them.
                Stage::LatentQkv { .. }
                | Stage::LatentOutput { .. }
                | Stage::SharedExperts { .. } => {}
                Stage::Experts { experts, weights } => {
                    // The declaration puts a router before every experts stage.
                    if let Some(router) = block.router() {
                        self.experts(experts, router, weights.each());
                    }
                }
                Stage::PostFfnNorm(norm) => self.norm(norm, work.h, work.h, n),
                Stage::FfnResidual => self.residual = Some(work.h),
                Stage::ParallelResidual => self.add(&[work.x, work.out, work.h], len),
                // Refused by `UploadPlan::new` (`check_stages`): no launch runs them yet.
                Stage::ValueNorm { .. }
                | Stage::PerLayerInput { .. }
                | Stage::OutputScale(_)
                | Stage::QueryNorm { .. }
                | Stage::SharedAttention { .. }
                | Stage::RouterNorm { .. }
                | Stage::ExpertScales(_)
                | Stage::StashFfn
                | Stage::AddStash => {}
                Stage::ResidualNorm(norm) => {
                    self.norm(norm, work.x, work.h, n);
                    self.norm(norm, work.x, work.x, n);
                }
            }
        }
    }

    /// Width of a row of the `qkv` buffer.
    fn qkv_width(&self) -> usize {
        let c = self.b.model;
        c.q_dim() + 2 * c.kv_dim()
    }

    /// `buffers[0] += buffers[1]` (`+ buffers[2]`: the parallel block's `x += out + h`).
    fn add(&mut self, buffers: &[u64], len: usize) {
        let name = if buffers.len() == 3 {
            "add2_inplace"
        } else {
            "add_inplace"
        };
        let mut args = [Arg::I64(0); 4];
        for (arg, &buffer) in args.iter_mut().zip(buffers) {
            *arg = Arg::Ptr(buffer);
        }
        args[buffers.len()] = Arg::I64(len as i64);
        self.elementwise(name, &args[..=buffers.len()], len);
    }

    /// Every head of q and of k RMS-normed with its scales.
    fn qk_norm(&mut self, (q_norm, k_norm): (u64, u64), eps: f32) {
        let c = self.b.model;
        let width = self.qkv_width();
        for (offset, heads, weight) in [(0, c.heads, q_norm), (c.q_dim(), c.kv_heads, k_norm)] {
            self.fixed(
                "head_rms_norm",
                launch::per_head(self.n, heads),
                &[
                    Arg::Ptr(self.b.work.qkv),
                    Arg::I32(width as i32),
                    Arg::I32(offset as i32),
                    Arg::Ptr(weight),
                    Arg::I32(c.head_dim as i32),
                    Arg::F32(eps),
                ],
            );
        }
    }

    /// q and k rotated at their positions, in one launch: the k heads follow the q heads in a
    /// row of the `qkv` buffer, so they are its heads `heads..heads + kv_heads`.
    fn rope(&mut self, rope: &RopeParams) {
        let c = self.b.model;
        let width = self.qkv_width();
        let theta_scale = rope.freq_base.powf(-2.0 / rope.n_rot as f32);
        // A magnitude scale of 0 tells the kernel there is no YaRN blend.
        let yarn = rope.yarn.unwrap_or(Yarn {
            corr_dims: [0.0, 0.0],
            mscale: 0.0,
        });
        self.fixed(
            "rope",
            launch::rope(self.n, c.heads + c.kv_heads, rope.n_rot),
            &[
                Arg::Ptr(self.b.work.qkv),
                Arg::I32(width as i32),
                Arg::I32(0),
                Arg::I32(c.head_dim as i32),
                Arg::I32(rope.n_rot as i32),
                Arg::Ptr(self.b.work.positions),
                Arg::F32(theta_scale),
                Arg::F32(rope.freq_scale),
                opt(self.b.model.rope_freqs.filter(|_| rope.factors)),
                Arg::I32(i32::from(rope.style == RopeStyle::Neox)),
                Arg::F32(yarn.corr_dims[0]),
                Arg::F32(yarn.corr_dims[1]),
                Arg::F32(yarn.mscale),
            ],
        );
    }

    /// The rows' keys and values into the layer's cache at their positions: `kv_store` into one
    /// sequence's cache (`kv` its addresses), `kv_store_rows` each row into its own (`kv` the
    /// layer's tables of addresses); both take the same arguments.
    fn kv_store(&mut self, kernel: KvKernel, kv: LayerKv) {
        let c = self.b.model;
        let (q_dim, kv_dim) = (c.q_dim(), c.kv_dim());
        self.fixed(
            self.b.kv.kernel(kernel),
            launch::per_row(self.n, kv_dim),
            &[
                Arg::Ptr(self.b.work.qkv),
                Arg::I32(self.qkv_width() as i32),
                Arg::I32(q_dim as i32),
                Arg::I32((q_dim + kv_dim) as i32),
                Arg::Ptr(kv.keys),
                Arg::Ptr(kv.values),
                Arg::Ptr(kv.table),
                Arg::I64(kv.block_stride),
                Arg::I32(kv_dim as i32),
                Arg::Ptr(self.b.work.positions),
                Arg::I32(kv.slots as i32),
            ],
        );
    }

    /// The feed-forward block from `h`; its output overwrites `h`.
    fn ffn(&mut self, ffn: Ffn, up: &FfnUp<OnDevice>, down: &Linear<OnDevice>) {
        let c = self.b.model;
        let work = *self.b.work;
        let (f, hidden, n) = (c.ffn_dim, c.hidden, self.n);
        match up {
            FfnUp::Gated { gate, up } => {
                self.adjacent_linears(&[gate, up], (work.h, hidden), (work.gate_up, 2 * f));
            }
            FfnUp::FusedGated(l) | FfnUp::Plain(l) => {
                self.linear(l, work.h, hidden, work.gate_up, 2 * f);
            }
        }
        if n <= launch::MMVQ_TOKENS as usize && self.on_q8_1(&down.weight) {
            // The activation quantized for the down projection in the same launch.
            self.fixed(
                "gated_activation_q8_1",
                launch::quantize_q8_1(n, f),
                &[
                    Arg::Ptr(work.gate_up),
                    Arg::I32(f as i32),
                    Arg::I32((2 * f) as i32),
                    Arg::I32(n as i32),
                    Arg::I32(activation_kind(ffn)),
                    Arg::Ptr(work.xq),
                    Arg::Ptr(work.xq_meta),
                ],
            );
            self.quantized = Some((work.gate_up, 2 * f, f));
        } else {
            self.gated_activation(ffn, work.gate_up, f, n);
        }
        self.linear(down, work.gate_up, 2 * f, work.h, hidden);
    }

    /// `gu[rows, 2f]`: the gate columns replaced by the activation of gate and up.
    fn gated_activation(&mut self, ffn: Ffn, gu: u64, f: usize, rows: usize) {
        let kind = activation_kind(ffn);
        self.elementwise(
            "gated_activation",
            &[
                Arg::Ptr(gu),
                Arg::I32(f as i32),
                Arg::I32((2 * f) as i32),
                Arg::I32(rows as i32),
                Arg::I32(kind),
            ],
            rows * f,
        );
    }

    /// The router's scores of `h`, then each row's experts and weights into the route buffers.
    fn route(&mut self, router: &Router, scores: &Linear<OnDevice>) {
        let c = self.b.model;
        let work = *self.b.work;
        self.linear(scores, work.h, c.hidden, work.router, router.experts);
        let gating = match router.gating {
            Gating::TopKSoftmax => 1,
            // The others are refused by `plan::check_stages`.
            _ => 0,
        };
        self.fixed(
            "moe_route",
            launch::route(self.n),
            &[
                Arg::Ptr(work.router),
                Arg::I32(router.experts as i32),
                Arg::I32(router.used as i32),
                Arg::I32(gating),
                Arg::Ptr(work.expert_ids),
                Arg::Ptr(work.expert_weights),
            ],
        );
        if self.grouped_experts() {
            self.fixed(
                "moe_group",
                launch::route(router.experts),
                &[
                    Arg::Ptr(work.expert_ids),
                    Arg::I32((self.n * router.used) as i32),
                    Arg::I32(self.n as i32),
                    Arg::Ptr(work.expert_counts),
                    Arg::Ptr(work.expert_lists),
                ],
            );
        }
    }

    /// `h = Σ weight · expert(h)` over each row's routed experts: every (row, expert) slot
    /// through the expert's projections, its weights found by the id the router wrote.
    fn experts(
        &mut self,
        shape: &Experts,
        router: &Router,
        [gate, up, down]: [&StackedAddress; 3],
    ) {
        let c = self.b.model;
        let work = *self.b.work;
        let (f, hidden, n, used) = (shape.ffn_dim, c.hidden, self.n, router.used);
        let slots = n * used;
        let gu = work.expert_gate_up;
        self.by_id(gate, (work.h, hidden, used), (gu, 2 * f), router);
        self.by_id(up, (work.h, hidden, used), (at(gu, f), 2 * f), router);
        self.gated_activation(shape.ffn, gu, f, slots);
        self.by_id(down, (gu, 2 * f, 1), (work.expert_out, hidden), router);
        self.elementwise(
            "moe_weighted_sum",
            &[
                Arg::Ptr(work.expert_out),
                Arg::Ptr(work.expert_weights),
                Arg::I32(used as i32),
                Arg::I32(hidden as i32),
                Arg::I32(n as i32),
                Arg::Ptr(work.h),
            ],
            n * hidden,
        );
    }

    /// Whether the step's products with a matrix of type `ty` at `ptr` run on tensor cores: in
    /// a prefill step, for a format that has them and whose codes are aligned for their reads.
    fn on_tensor_cores(&self, ty: GpuType, ptr: u64) -> bool {
        self.recipe == Recipe::Prefill && ty.has_mma() && ptr.is_multiple_of(ty.codes_alignment())
    }

    /// Whether the experts run grouped by expert (`moe_group`'s lists): always in a prefill
    /// step, for more than one row in a decode step.
    fn grouped_experts(&self) -> bool {
        self.recipe == Recipe::Prefill || self.n > 1
    }

    /// `y[s] = W_e · x[s / x_div] + b_e` for every slot `s`, `e` the slot's routed expert:
    /// `x` is `(buffer, row width, x_div)`, `y` is `(buffer, row width)`. Grouped, each expert
    /// runs once over the slots it received (`x_div` slots per token), on tensor cores in a
    /// prefill step; otherwise one token's slots run one by one. The f32 kernels of both
    /// share each slot's sums.
    fn by_id(
        &mut self,
        w: &StackedAddress,
        x: (u64, usize, usize),
        y: (u64, usize),
        router: &Router,
    ) {
        let work = *self.b.work;
        let n = self.n;
        if self.grouped_experts() {
            let (kernel, groups, shape) = if self.on_tensor_cores(w.ty, w.ptr) {
                let groups = n.div_ceil(launch::MMA_TOKENS as usize);
                let shape = launch::mma_grouped_by_id(w.rows, router.experts, groups);
                (KernelRef::MmaById(w.ty), groups, shape)
            } else {
                let groups = n.div_ceil(launch::MATMUL_TOKENS as usize);
                let shape = launch::matmul_grouped_by_id(w.rows, router.experts, groups);
                (KernelRef::MatmulById(w.ty), groups, shape)
            };
            let routing = [
                Arg::Ptr(work.expert_counts),
                Arg::Ptr(work.expert_lists),
                Arg::I32(n as i32),
                Arg::I32(groups as i32),
            ];
            self.push(kernel, shape, &w.by_id_args(&routing, x, y));
            return;
        }
        self.push(
            KernelRef::MatvecById(w.ty),
            launch::matmul_by_id(w.rows, n * router.used),
            &w.by_id_args(&[Arg::Ptr(work.expert_ids)], x, y),
        );
    }

    /// Final norm, LM head (with bias) and soft-cap for rows `first..first + rows`.
    fn head(&mut self, first: usize, rows: usize) {
        let c = self.b.model;
        let work = *self.b.work;
        let x = at(work.x, first * c.hidden);
        // The upload plan refuses a model without an output norm.
        match &c.output_norm {
            // Every row's logits: the last residual added in the norm's launch.
            Some(norm) if (first, rows) == (0, self.n) => {
                let quantize = self.n <= launch::MMVQ_TOKENS as usize && self.on_q8_1(c.lm_head());
                self.norm_x(norm, quantize);
            }
            Some(norm) => {
                self.add_residual();
                self.norm(norm, x, work.h, rows);
            }
            None => self.add_residual(),
        }
        self.matmul(
            c.lm_head(),
            c.output_bias,
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
