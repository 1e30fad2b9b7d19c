//! The stages of a decoder block ([`Stage`]) and, beside each, its weights' roles and
//! shapes ([`Stage::map`]): adding a stage that brings weights touches this file and the
//! tensor roles only, then each executor's arm.
//!
//! The stages read and write a few activation buffers, each `[rows, width]`: `x` the residual
//! stream, `h` the normed input (and then the FFN's output), `q`, `k`, `v` the projections,
//! `attn` the attention output and `out` its projection.
//!
//! A mixture-of-experts layer replaces [`Stage::Ffn`] by [`Stage::Router`], which picks each
//! row's experts and their weights, and [`Stage::Experts`], which runs only those experts and
//! sums their outputs into `h`; a layer with shared experts runs [`Stage::SharedExperts`]
//! first, on every row, and the experts stage adds its output to the sum.
//!
//! A Gemma 4 mixture-of-experts layer runs its dense FFN beside the experts: the dense output
//! (post-normed) is set aside by [`Stage::StashFfn`], the router reads its own norm of the
//! residual stream ([`Stage::RouterNorm`]), the experts' output is post-normed in turn and
//! [`Stage::AddStash`] adds the two. A Gemma 4 layer that shares its KV cache projects only
//! its queries ([`Qkv::QueryOnly`], [`Stage::QueryNorm`]) and attends over the cache of an
//! earlier layer ([`Stage::SharedAttention`]), storing nothing.
//!
//! Multi-head latent attention ([`Mla`]) replaces [`Stage::Qkv`] by [`Stage::LatentQkv`]
//! (absorbed queries and one latent key row per position, whose values are the keys) and puts
//! [`Stage::LatentOutput`] (each head's latent output up-projected) before the output
//! projection; RoPE and attention are the ordinary stages over one kv head.

use crate::handles::{Handles, Linear, Mapper, NormWeights, Shape, Tensor};
use crate::params::{AttentionParams, DeltaNet, Experts, Ffn, Mla, RopeParams, Router, ShortConv};
use crate::place::Place;
use crate::tensor::Role;

/// How q, k and v are projected.
#[derive(Clone, Debug)]
pub enum Qkv<H: Handles> {
    /// Three matrices: `[q_dim, hidden]`, `[kv_dim, hidden]`, `[kv_dim, hidden]`.
    Separate {
        /// Queries.
        q: Linear<H>,
        /// Keys.
        k: Linear<H>,
        /// Values.
        v: Linear<H>,
    },
    /// One matrix `[q_dim + 2·kv_dim, hidden]`, output q | k | v.
    Fused(Linear<H>),
    /// Separate q and k, and v where the file has it; without it the values are the keys as
    /// projected, before any norm or rotation (gemma4's full-attention layers).
    OptionalValue {
        /// Queries.
        q: Linear<H>,
        /// Keys.
        k: Linear<H>,
        /// Values, if the layer has its own.
        v: Option<Linear<H>>,
    },
    /// Queries only (`[q_dim, hidden]`): the layer attends over the keys and values an earlier
    /// layer stored ([`Stage::SharedAttention`]).
    QueryOnly {
        /// Queries.
        q: Linear<H>,
    },
    /// Three matrices as [`Qkv::Separate`], the query one `[2·q_dim, hidden]` giving each
    /// head its query then its output gate (Qwen3.5's gated attention; see
    /// [`Stage::AttentionGate`]).
    GatedQuery {
        /// Queries and gates, per head `[query | gate]`.
        q: Linear<H>,
        /// Keys.
        k: Linear<H>,
        /// Values.
        v: Linear<H>,
    },
}

/// How the FFN's first projection is stored.
#[derive(Clone, Debug)]
pub enum FfnUp<H: Handles> {
    /// Separate gate and up matrices, `[ffn, hidden]` each.
    Gated {
        /// Gate projection.
        gate: Linear<H>,
        /// Up projection.
        up: Linear<H>,
    },
    /// One matrix `[2·ffn, hidden]`, output gate | up (phi3).
    FusedGated(Linear<H>),
    /// Up projection only, `[ffn, hidden]` (GELU MLP).
    Plain(Linear<H>),
}

/// How multi-head latent attention projects its queries.
#[derive(Clone, Debug)]
pub enum LatentQ<H: Handles> {
    /// `q = attn_q · h`, `[heads · (nope + rope), hidden]`.
    Direct(Linear<H>),
    /// `q = attn_q_b · norm(attn_q_a · h)`: through a compressed query of `q_lora` values.
    Lora {
        /// `[q_lora, hidden]`.
        a: Linear<H>,
        /// The compressed query's RMSNorm, `[q_lora]`.
        norm: NormWeights<H>,
        /// `[heads · (nope + rope), q_lora]`.
        b: Linear<H>,
    },
}

/// The weights of a [`Stage::DeltaNet`].
#[derive(Clone, Debug)]
pub struct DeltaNetWeights<H: Handles> {
    /// `[conv_dim, hidden]`: `q | k | v`.
    pub qkv: Linear<H>,
    /// `[v_dim, hidden]`: the output gate `z`.
    pub gate: Linear<H>,
    /// The convolution kernel, `[conv_dim, taps]`.
    pub kernel: H::Vector,
    /// `[v_heads]`, added to the decay projection.
    pub dt_bias: H::Vector,
    /// `[v_heads]`, the (negative) decay rates.
    pub a: H::Vector,
    /// `[v_heads, hidden]`.
    pub beta: Linear<H>,
    /// `[v_heads, hidden]`.
    pub alpha: Linear<H>,
    /// `[state]`, the output norm of every value head.
    pub norm: H::Vector,
    /// `[hidden, v_dim]`.
    pub output: Linear<H>,
}

/// The three projections of a gated FFN of experts.
#[derive(Clone, Debug)]
pub struct GateUpDown<T> {
    /// The gate, `[ffn, hidden]`.
    pub gate: T,
    /// The up projection, `[ffn, hidden]`.
    pub up: T,
    /// The down projection, `[hidden, ffn]`.
    pub down: T,
}

impl<T> GateUpDown<T> {
    /// `[gate, up, down]`.
    pub fn each(&self) -> [&T; 3] {
        [&self.gate, &self.up, &self.down]
    }

    /// `[gate, up, down]`, to change.
    pub fn each_mut(&mut self) -> [&mut T; 3] {
        [&mut self.gate, &mut self.up, &mut self.down]
    }
}

/// One step of a decoder block, on the `n` rows of a batch, with the weights it reads.
#[derive(Clone, Debug)]
pub enum Stage<H: Handles> {
    /// `h = norm(x)` with the layer's attention norm.
    AttentionNorm(NormWeights<H>),
    /// `q`, `k`, `v` projected from `h`.
    Qkv(Qkv<H>),
    /// Multi-head latent attention's projections from `h`: `q` the absorbed query heads
    /// `[q_pe | W_kb[head] · q_nope]` and `k` the latent row `[k_pe | norm(c)]` of
    /// `[c | k_pe] = kv_a · h` (the transformer's `head_dim` is `rope + kv_lora` and its one
    /// kv head this row; attention reads the values from the keys).
    LatentQkv {
        /// The widths.
        mla: Mla,
        /// The query projection.
        q: LatentQ<H>,
        /// `[kv_lora + rope, hidden]`.
        kv_a: Linear<H>,
        /// The latent's RMSNorm, `[kv_lora]`.
        kv_norm: NormWeights<H>,
        /// Per head `[kv_lora, nope]`: absorbs `q_nope` into the latent space.
        k_b: H::Experts,
    },
    /// Every head of `q` and of `k` RMS-normed with the layer's q and k scales (`[head_dim]`).
    QkNorm {
        /// Added to the variance.
        eps: f32,
        /// Scale of every query head.
        q: H::Vector,
        /// Scale of every key head.
        k: H::Vector,
    },
    /// Every head of `q` RMS-normed with the layer's q scale (`[head_dim]`): the q/k norm of a
    /// layer that projects no keys.
    QueryNorm {
        /// Added to the variance.
        eps: f32,
        /// Scale of every query head.
        q: H::Vector,
    },
    /// Every head of `v` RMS-normed without a scale (gemma4).
    ValueNorm {
        /// Added to the variance.
        eps: f32,
    },
    /// `q` and `k` rotated at each row's position (with the model's per-frequency factors, if
    /// it has them).
    Rope(RopeParams),
    /// Each row's `k` and `v` stored in its sequence's KV cache at its position, then
    /// `attn = attention(q, cache)`.
    Attention {
        /// Scale, softcap, window.
        params: AttentionParams,
        /// Per-head sink logits `[heads]`, present exactly when `params.sinks`.
        sinks: Option<H::Vector>,
    },
    /// `attn = attention(q, the cache of layer source)`: the keys and values an earlier layer
    /// of the same kind stored (Gemma 4's KV sharing); this layer stores none.
    SharedAttention {
        /// Scale, softcap, window.
        params: AttentionParams,
        /// The layer whose cache is read.
        source: usize,
    },
    /// `attn = concat(W_vb[head] · latent part of attn[head])`: each head's output of latent
    /// attention, `[heads · v_head]`.
    LatentOutput {
        /// The widths.
        mla: Mla,
        /// Per head `[v_head, kv_lora]`.
        v_b: H::Experts,
    },
    /// `attn ⊙= sigmoid(gate)` with the gates of [`Qkv::GatedQuery`].
    AttentionGate,
    /// `out = short_conv(h)`, carrying the sequence's convolution window (in place of the
    /// attention stages of a recurrent layer).
    ShortConv {
        /// Channels and taps.
        conv: ShortConv,
        /// `[3·hidden, hidden]`: `b | c | u`.
        in_proj: Linear<H>,
        /// The kernel, `[channels, taps]`.
        kernel: H::Vector,
        /// `[hidden, hidden]`.
        out_proj: Linear<H>,
    },
    /// `out = delta_net(h)`, carrying the sequence's convolution window and state matrices
    /// (in place of the attention stages of a recurrent layer).
    DeltaNet {
        /// Heads, state size, taps.
        net: DeltaNet,
        /// Its projections, convolution kernel, decay and norm.
        weights: DeltaNetWeights<H>,
    },
    /// `out = attn_output(attn)`, `[hidden, q_dim]` (`[hidden, heads · v_head]` after latent
    /// attention).
    AttentionOutput(Linear<H>),
    /// `out = norm(out)` with the layer's post-attention norm.
    PostAttentionNorm(NormWeights<H>),
    /// `x += out`.
    AttentionResidual,
    /// `h = norm(x)` with the layer's FFN norm.
    FfnNorm(NormWeights<H>),
    /// `h = ffn(h)`.
    Ffn {
        /// The activation and whether it is gated.
        ffn: Ffn,
        /// The first projection(s).
        up: FfnUp<H>,
        /// `[hidden, ffn]`.
        down: Linear<H>,
    },
    /// Each row's experts and their weights, from the router's scores of `h`.
    Router {
        /// Expert counts and gating.
        router: Router,
        /// `[experts, hidden]`: one score per expert.
        scores: Linear<H>,
        /// `[experts]`, added to the scores only to choose the experts (`exp_probs_b`).
        selection_bias: Option<H::Vector>,
    },
    /// `h = scale · norm(x)`: the router's own input (Gemma 4: RMS with `ffn_gate_inp.scale`,
    /// `scale` = 1/√hidden).
    RouterNorm {
        /// The norm.
        norm: NormWeights<H>,
        /// Multiplies the normed row.
        scale: f32,
    },
    /// Each row's routed weights multiplied by its experts' output scales `[experts]` (Gemma
    /// 4's `ffn_down_exps.scale`, a scale on each expert's output).
    ExpertScales(H::Vector),
    /// `stash = h`: the dense FFN's output, set aside while the experts run beside it.
    StashFfn,
    /// `h += stash`.
    AddStash,
    /// `shared = g · down(act(gate(h), up(h)))` on every row, kept for [`Stage::Experts`] to
    /// add; `g = sigmoid(gate_inp · h)` per row where the layer has that gate, else 1.
    SharedExperts {
        /// The shape of the shared experts together (their widths summed).
        experts: Experts,
        /// `[ffn_dim, hidden]`, `[ffn_dim, hidden]`, `[hidden, ffn_dim]`.
        weights: GateUpDown<Linear<H>>,
        /// `[hidden]`: the per-row gate's weights (Qwen3.5-MoE).
        gate_inp: Option<H::Vector>,
    },
    /// `h = Σ weight_e · expert_e(h)` over each row's routed experts, in the router's order,
    /// plus `shared` when the layer has shared experts.
    Experts {
        /// Each expert's shape.
        experts: Experts,
        /// Every expert's gate and up, `[expert_ffn, hidden]` each, and down,
        /// `[hidden, expert_ffn]` each.
        weights: GateUpDown<H::Experts>,
    },
    /// `h = norm(h)` with the layer's post-FFN norm.
    PostFfnNorm(NormWeights<H>),
    /// `x += h`.
    FfnResidual,
    /// `x += out + h`: attention and FFN both read the normed input (a parallel block).
    ParallelResidual,
    /// `x += norm(proj(gelu(gate(x)) ⊙ input))` with the row's input to this layer from
    /// [`Transformer::per_layer_inputs`](crate::Transformer::per_layer_inputs) (gemma4's per-layer embeddings).
    PerLayerInput {
        /// `[width, hidden]`.
        gate: Linear<H>,
        /// `[hidden, width]`.
        proj: Linear<H>,
        /// The norm of the projection.
        norm: NormWeights<H>,
    },
    /// `x *= scale`, a one-value tensor (gemma4's `layer_output_scale`).
    OutputScale(H::Vector),
    /// `x = norm(x)` and `h = x`: a post-norm block (BERT) normalises the residual stream
    /// itself after each residual add, and the next projection reads it unchanged.
    ResidualNorm(NormWeights<H>),
}

impl<H: Handles> Stage<H> {
    /// The stage with its weights mapped at `at`, each with its role and the shape `at`'s
    /// widths imply; `None` drops it: q/k norms whose weights the mapper finds absent (an
    /// optional pair, as GLM-4.5 files may leave out) and expert scales a file does not have.
    pub(crate) fn map<'t, B: Handles, M: Mapper<'t, H, B>>(
        &'t self,
        at: &Place,
        m: &mut M,
    ) -> Result<Option<Stage<B>>, M::Error> {
        let (hidden, ffn, model_heads) = (at.widths.hidden, at.widths.ffn_dim, at.widths.heads);
        let (q_dim, kv_dim, head_dim) = (at.heads.q_dim(), at.heads.kv_dim(), at.heads.head_dim);
        Ok(Some(match self {
            Stage::AttentionNorm(n) => Stage::AttentionNorm(at.norm(n, hidden, m)?),
            Stage::Qkv(Qkv::Separate { q, k, v }) => Stage::Qkv(Qkv::Separate {
                q: at.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
                k: at.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: at.linear(Role::AttnV, (kv_dim, hidden), v, m)?,
            }),
            Stage::Qkv(Qkv::Fused(qkv)) => Stage::Qkv(Qkv::Fused(at.linear(
                Role::AttnQkv,
                (q_dim + 2 * kv_dim, hidden),
                qkv,
                m,
            )?)),
            Stage::Qkv(Qkv::GatedQuery { q, k, v }) => Stage::Qkv(Qkv::GatedQuery {
                q: at.linear(Role::AttnQ, (2 * q_dim, hidden), q, m)?,
                k: at.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: at.linear(Role::AttnV, (kv_dim, hidden), v, m)?,
            }),
            Stage::Qkv(Qkv::OptionalValue { q, k, v }) => Stage::Qkv(Qkv::OptionalValue {
                q: at.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
                k: at.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: match v {
                    Some(v) => at.optional_linear(Role::AttnV, (kv_dim, hidden), v, m)?,
                    None => None,
                },
            }),
            Stage::Qkv(Qkv::QueryOnly { q }) => Stage::Qkv(Qkv::QueryOnly {
                q: at.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
            }),
            Stage::AttentionGate => Stage::AttentionGate,
            Stage::ShortConv {
                conv,
                in_proj,
                kernel,
                out_proj,
            } => Stage::ShortConv {
                conv: *conv,
                in_proj: at.linear(Role::ShortConvInProj, (3 * hidden, hidden), in_proj, m)?,
                kernel: at.filter(Role::ShortConvConv, (conv.channels, conv.taps), kernel, m)?,
                out_proj: at.linear(Role::ShortConvOutProj, (hidden, hidden), out_proj, m)?,
            },
            Stage::DeltaNet { net, weights: w } => {
                let (conv_dim, v_dim, heads) = (net.conv_dim(), net.v_dim(), net.v_heads);
                let dt = Tensor {
                    name: at.name(Role::SsmDt).bias(),
                    shape: Shape::Vector(heads),
                };
                let weights = DeltaNetWeights {
                    qkv: at.linear(Role::AttnQkv, (conv_dim, hidden), &w.qkv, m)?,
                    gate: at.linear(Role::AttnGate, (v_dim, hidden), &w.gate, m)?,
                    kernel: at.filter(Role::SsmConv1d, (conv_dim, net.taps), &w.kernel, m)?,
                    dt_bias: m.vector(&dt, &w.dt_bias)?,
                    a: at.vector(Role::SsmA, heads, &w.a, m)?,
                    beta: at.linear(Role::SsmBeta, (heads, hidden), &w.beta, m)?,
                    alpha: at.linear(Role::SsmAlpha, (heads, hidden), &w.alpha, m)?,
                    norm: at.vector(Role::SsmNorm, net.state, &w.norm, m)?,
                    output: at.linear(Role::SsmOut, (hidden, v_dim), &w.output, m)?,
                };
                Stage::DeltaNet { net: *net, weights }
            }
            Stage::QkNorm { eps, q, k } => {
                let t = Tensor {
                    name: at.name(Role::AttnQNorm),
                    shape: Shape::Vector(head_dim),
                };
                let Some(q) = m.optional_vector(&t, q)? else {
                    return Ok(None);
                };
                Stage::QkNorm {
                    eps: *eps,
                    q,
                    k: at.vector(Role::AttnKNorm, head_dim, k, m)?,
                }
            }
            Stage::QueryNorm { eps, q } => Stage::QueryNorm {
                eps: *eps,
                q: at.vector(Role::AttnQNorm, head_dim, q, m)?,
            },
            Stage::ValueNorm { eps } => Stage::ValueNorm { eps: *eps },
            Stage::LatentQkv {
                mla,
                q,
                kv_a,
                kv_norm,
                k_b,
            } => {
                let q_width = model_heads * mla.q_head();
                Stage::LatentQkv {
                    mla: *mla,
                    q: match q {
                        LatentQ::Direct(l) => {
                            LatentQ::Direct(at.linear(Role::AttnQ, (q_width, hidden), l, m)?)
                        }
                        LatentQ::Lora { a, norm, b } => {
                            let lora = mla.q_lora.unwrap_or(0);
                            LatentQ::Lora {
                                a: at.linear(Role::AttnQA, (lora, hidden), a, m)?,
                                norm: at.norm(norm, lora, m)?,
                                b: at.linear(Role::AttnQB, (q_width, lora), b, m)?,
                            }
                        }
                    },
                    kv_a: at.linear(Role::AttnKvAMqa, (mla.latent(), hidden), kv_a, m)?,
                    kv_norm: at.norm(kv_norm, mla.kv_lora, m)?,
                    k_b: at.experts(Role::AttnKB, (model_heads, mla.kv_lora, mla.nope), k_b, m)?,
                }
            }
            Stage::LatentOutput { mla, v_b } => Stage::LatentOutput {
                mla: *mla,
                v_b: at.experts(Role::AttnVB, (model_heads, mla.v_head, mla.kv_lora), v_b, m)?,
            },
            Stage::Rope(params) => Stage::Rope(*params),
            Stage::Attention { params, sinks } => Stage::Attention {
                params: *params,
                sinks: match sinks {
                    Some(s) => Some(at.vector(Role::AttnSinks, at.heads.heads, s, m)?),
                    None => None,
                },
            },
            Stage::SharedAttention { params, source } => Stage::SharedAttention {
                params: *params,
                source: *source,
            },
            Stage::AttentionOutput(l) => {
                let width = at.mla.map_or(q_dim, |mla| model_heads * mla.v_head);
                Stage::AttentionOutput(at.linear(Role::AttnOutput, (hidden, width), l, m)?)
            }
            Stage::PostAttentionNorm(n) => Stage::PostAttentionNorm(at.norm(n, hidden, m)?),
            Stage::AttentionResidual => Stage::AttentionResidual,
            Stage::FfnNorm(n) => Stage::FfnNorm(at.norm(n, hidden, m)?),
            Stage::Ffn {
                ffn: kind,
                up,
                down,
            } => Stage::Ffn {
                ffn: *kind,
                up: match up {
                    FfnUp::Gated { gate, up } => FfnUp::Gated {
                        gate: at.linear(Role::FfnGate, (ffn, hidden), gate, m)?,
                        up: at.linear(Role::FfnUp, (ffn, hidden), up, m)?,
                    },
                    FfnUp::FusedGated(l) => {
                        FfnUp::FusedGated(at.linear(Role::FfnUp, (2 * ffn, hidden), l, m)?)
                    }
                    FfnUp::Plain(l) => FfnUp::Plain(at.linear(Role::FfnUp, (ffn, hidden), l, m)?),
                },
                down: at.linear(Role::FfnDown, (hidden, ffn), down, m)?,
            },
            Stage::Router {
                router,
                scores,
                selection_bias,
            } => Stage::Router {
                router: *router,
                scores: at.linear(Role::FfnGateInp, (router.experts, hidden), scores, m)?,
                selection_bias: match selection_bias {
                    Some(b) => {
                        let t = Tensor {
                            name: at.name(Role::ExpProbsB).bias(),
                            shape: Shape::Vector(router.experts),
                        };
                        Some(m.vector(&t, b)?)
                    }
                    None => None,
                },
            },
            Stage::RouterNorm { norm, scale } => Stage::RouterNorm {
                norm: at.norm(norm, hidden, m)?,
                scale: *scale,
            },
            Stage::ExpertScales(scales) => {
                let t = Tensor {
                    name: at.name(Role::FfnDownExpsScale),
                    shape: Shape::Vector(at.experts),
                };
                match m.optional_vector(&t, scales)? {
                    Some(scales) => Stage::ExpertScales(scales),
                    None => return Ok(None),
                }
            }
            Stage::StashFfn => Stage::StashFfn,
            Stage::AddStash => Stage::AddStash,
            Stage::SharedExperts {
                experts,
                weights: w,
                gate_inp,
            } => {
                let f = experts.ffn_dim;
                Stage::SharedExperts {
                    experts: *experts,
                    weights: GateUpDown {
                        gate: at.linear(Role::FfnGateShexp, (f, hidden), &w.gate, m)?,
                        up: at.linear(Role::FfnUpShexp, (f, hidden), &w.up, m)?,
                        down: at.linear(Role::FfnDownShexp, (hidden, f), &w.down, m)?,
                    },
                    gate_inp: match gate_inp {
                        Some(g) => Some(at.vector(Role::FfnGateInpShexp, hidden, g, m)?),
                        None => None,
                    },
                }
            }
            Stage::Experts {
                experts,
                weights: w,
            } => {
                let count = at.experts;
                let f = experts.ffn_dim;
                Stage::Experts {
                    experts: *experts,
                    weights: GateUpDown {
                        gate: at.experts(Role::FfnGateExps, (count, f, hidden), &w.gate, m)?,
                        up: at.experts(Role::FfnUpExps, (count, f, hidden), &w.up, m)?,
                        down: at.experts(Role::FfnDownExps, (count, hidden, f), &w.down, m)?,
                    },
                }
            }
            Stage::PostFfnNorm(n) => Stage::PostFfnNorm(at.norm(n, hidden, m)?),
            Stage::FfnResidual => Stage::FfnResidual,
            Stage::ParallelResidual => Stage::ParallelResidual,
            Stage::ResidualNorm(n) => Stage::ResidualNorm(at.norm(n, hidden, m)?),
            Stage::PerLayerInput { gate, proj, norm } => {
                let width = at.widths.per_layer_input;
                Stage::PerLayerInput {
                    gate: at.linear(Role::PerLayerInpGate, (width, hidden), gate, m)?,
                    proj: at.linear(Role::PerLayerProj, (hidden, width), proj, m)?,
                    norm: at.norm(norm, hidden, m)?,
                }
            }
            Stage::OutputScale(scale) => {
                Stage::OutputScale(at.vector(Role::LayerOutputScale, 1, scale, m)?)
            }
        }))
    }
}
