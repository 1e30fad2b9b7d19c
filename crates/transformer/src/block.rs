//! The transformer as data: what a decoder-only model computes, described once with its
//! weights and run by each executor (the CPU forward pass of `rinfer-model`, the CUDA step
//! builder of `rinfer-cuda`).
//!
//! A [`Transformer`](crate::Transformer) holds the dimensions, the embeddings, one [`Block`]
//! per layer and the head. A block is the list of [`Stage`]s it runs in order, each with its parameters and the
//! weights it reads; an executor walks the list with one `match`. Architectures differ only in
//! these lists and their parameters, never in code.
//!
//! The tree is generic over the weight handle ([`Handles`]): an architecture declares it with
//! [`Presence`] handles (which tensors a file must or may hold), the loader maps that to host
//! matrices, and a GPU maps the host tree to device addresses, each with one
//! [`Transformer::map`](crate::Transformer::map). A stage therefore always has the weights it
//! reads; no executor checks.
//! `map` hands every weight's [`Tensor`] (its name and the shape the dimensions imply) to the
//! [`Mapper`], so no backend spells a tensor name or recomputes a shape.
//!
//! The stages read and write a few activation buffers, each `[rows, width]`: `x` the residual
//! stream, `h` the normed input (and then the FFN's output), `q`, `k`, `v` the projections,
//! `attn` the attention output and `out` its projection.
//!
//! Layers may differ in their heads ([`Block::heads`]: gemma4's full-attention layers have
//! wider heads and fewer of them than its sliding-window ones), so a layer's q, k and v widths
//! are its block's, and so are the rows its KV cache keeps.
//!
//! A mixture-of-experts layer replaces [`Stage::Ffn`] by [`Stage::Router`], which picks each
//! row's experts and their weights, and [`Stage::Experts`], which runs only those experts and
//! sums their outputs into `h`; a layer with shared experts runs [`Stage::SharedExperts`]
//! first, on every row, and the experts stage adds its output to the sum.
//!
//! Multi-head latent attention ([`Mla`]) replaces [`Stage::Qkv`] by [`Stage::LatentQkv`]
//! (absorbed queries and one latent key row per position, whose values are the keys) and puts
//! [`Stage::LatentOutput`] (each head's latent output up-projected) before the output
//! projection; RoPE and attention are the ordinary stages over one kv head.
//!
//! ```
//! use rinfer_transformer::{Block, Heads, Linear, Norm, NormKind, NormWeights, Qkv, Role, Stage};
//!
//! // A block without positions or attention, with `()` for every weight, to show the list.
//! let norm = |role| NormWeights { role, params: Norm { kind: NormKind::Rms, eps: 1e-6 }, weight: (), bias: None };
//! let linear = || Linear { weight: (), bias: None };
//! let heads = Heads { heads: 4, kv_heads: 2, head_dim: 16 };
//! let block: Block<()> = Block {
//!     heads,
//!     stages: vec![
//!         Stage::AttentionNorm(norm(Role::AttnNorm)),
//!         Stage::Qkv(Qkv::Fused(linear())),
//!         Stage::AttentionOutput(linear()),
//!         Stage::AttentionResidual,
//!     ],
//! };
//! assert_eq!(block.attention(), None);
//! ```

use std::fmt::Debug;

use crate::params::{
    AttentionParams, DeltaNet, Experts, Ffn, Heads, Mla, Norm, Recurrence, RopeParams, Router,
    ShortConv,
};
use crate::tensor::{Role, TensorName};

/// The weight handles of one use of the tree: what a matrix, a vector and a layer's stacked
/// experts are (a presence for a declaration, host data for the CPU, addresses for a GPU).
pub trait Handles {
    /// A 2-D weight matrix `[rows, cols]` in its stored block format.
    type Matrix: Clone + Debug;
    /// An f32 vector: a norm's scale or bias, a projection's bias, sink logits, RoPE factors.
    type Vector: Clone + Debug;
    /// One projection of every expert of a layer, with their biases if they have them.
    type Experts: Clone + Debug;
}

/// No weights: the tree's shape alone.
impl Handles for () {
    type Matrix = ();
    type Vector = ();
    type Experts = ();
}

/// Whether a tensor a declaration names must be in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// The file must have it.
    Required,
    /// The file may have it (llama.cpp's `TENSOR_NOT_REQUIRED`).
    Optional,
}

/// An architecture's declaration: which tensors a file holds. A field that is `None` names a
/// tensor the architecture does not have; the handle of a stacked-experts field says whether
/// the experts have biases.
impl Handles for Presence {
    type Matrix = Presence;
    type Vector = Presence;
    type Experts = Option<Presence>;
}

/// The shape of a weight as the dimensions imply it (`rows` output features of `cols` inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `[len]`.
    Vector(usize),
    /// `[rows, cols]`.
    Matrix {
        /// Output features.
        rows: usize,
        /// Input features.
        cols: usize,
    },
    /// `[any, cols]`: a table whose rows the file decides (learned positions).
    Table {
        /// Width of a row.
        cols: usize,
    },
    /// A depthwise convolution kernel, f32 `[channels, taps]` (GGUF `[taps, channels]`): a
    /// [`Handles::Vector`] of `channels · taps` values, each channel's taps together.
    Filter {
        /// Channels.
        channels: usize,
        /// Taps per channel.
        taps: usize,
    },
    /// `count` matrices `[rows, cols]`, one per expert, stacked.
    Experts {
        /// Experts.
        count: usize,
        /// Output features of one expert.
        rows: usize,
        /// Input features.
        cols: usize,
    },
}

/// One weight of the tree as a [`Mapper`] sees it: its name and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// The tensor's name (a bias is named by [`TensorName::bias`] of its weight's name).
    pub name: TensorName,
    /// Its shape.
    pub shape: Shape,
}

/// Turns each weight handle of a tree of `A` into one of `B`
/// ([`Transformer::map`](crate::Transformer::map)); the handles are borrowed from the tree for `'t`, so `B`'s may borrow from them.
pub trait Mapper<'t, A: Handles, B: Handles> {
    /// What a failed weight reports.
    type Error;

    /// A matrix the tree has.
    fn matrix(&mut self, t: &Tensor, m: &'t A::Matrix) -> Result<B::Matrix, Self::Error>;

    /// A vector the tree has.
    fn vector(&mut self, t: &Tensor, v: &'t A::Vector) -> Result<B::Vector, Self::Error>;

    /// A layer's stacked experts of one projection (`t.shape` is [`Shape::Experts`]; their
    /// biases are named by `t.name.bias()`).
    fn experts(&mut self, t: &Tensor, e: &'t A::Experts) -> Result<B::Experts, Self::Error>;

    /// A matrix in an optional field: mapped, or dropped when the mapper returns `None`.
    fn optional_matrix(
        &mut self,
        t: &Tensor,
        m: &'t A::Matrix,
    ) -> Result<Option<B::Matrix>, Self::Error> {
        self.matrix(t, m).map(Some)
    }

    /// A vector in an optional field: mapped, or dropped when the mapper returns `None`.
    fn optional_vector(
        &mut self,
        t: &Tensor,
        v: &'t A::Vector,
    ) -> Result<Option<B::Vector>, Self::Error> {
        self.vector(t, v).map(Some)
    }
}

/// A linear layer `y = W·x + b`.
#[derive(Clone, Debug)]
pub struct Linear<H: Handles> {
    /// `[out, in]`.
    pub weight: H::Matrix,
    /// `[out]`.
    pub bias: Option<H::Vector>,
}

/// A normalisation with its weights.
#[derive(Clone, Debug)]
pub struct NormWeights<H: Handles> {
    /// The tensor that holds it (gpt-oss keeps its FFN norm in `post_attention_norm`).
    pub role: Role,
    /// Kind and epsilon.
    pub params: Norm,
    /// Scale, `[width]`.
    pub weight: H::Vector,
    /// Bias, `[width]` (LayerNorm).
    pub bias: Option<H::Vector>,
}

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
        /// `[conv_dim, hidden]`: `q | k | v`.
        qkv: Linear<H>,
        /// `[v_dim, hidden]`: the output gate `z`.
        gate: Linear<H>,
        /// The convolution kernel, `[conv_dim, taps]`.
        kernel: H::Vector,
        /// `[v_heads]`, added to the decay projection.
        dt_bias: H::Vector,
        /// `[v_heads]`, the (negative) decay rates.
        a: H::Vector,
        /// `[v_heads, hidden]`.
        beta: Linear<H>,
        /// `[v_heads, hidden]`.
        alpha: Linear<H>,
        /// `[state]`, the output norm of every value head.
        norm: H::Vector,
        /// `[hidden, v_dim]`.
        output: Linear<H>,
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
    /// `shared = g · down(act(gate(h), up(h)))` on every row, kept for [`Stage::Experts`] to
    /// add; `g = sigmoid(gate_inp · h)` per row where the layer has that gate, else 1.
    SharedExperts {
        /// The shape of the shared experts together (their widths summed).
        experts: Experts,
        /// `[ffn_dim, hidden]`.
        gate: Linear<H>,
        /// `[ffn_dim, hidden]`.
        up: Linear<H>,
        /// `[hidden, ffn_dim]`.
        down: Linear<H>,
        /// `[hidden]`: the per-row gate's weights (Qwen3.5-MoE).
        gate_inp: Option<H::Vector>,
    },
    /// `h = Σ weight_e · expert_e(h)` over each row's routed experts, in the router's order,
    /// plus `shared` when the layer has shared experts.
    Experts {
        /// Each expert's shape.
        experts: Experts,
        /// Every expert's gate, `[expert_ffn, hidden]` each.
        gate: H::Experts,
        /// Every expert's up, `[expert_ffn, hidden]` each.
        up: H::Experts,
        /// Every expert's down, `[hidden, expert_ffn]` each.
        down: H::Experts,
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

/// The stages of one decoder layer, in the order they run.
#[derive(Clone, Debug)]
pub struct Block<H: Handles> {
    /// The layer's attention heads: the widths of its q, k and v and of its KV cache rows.
    pub heads: Heads,
    /// The stages.
    pub stages: Vec<Stage<H>>,
}

impl<H: Handles> Block<H> {
    /// The parameters of the block's attention, if it has one.
    pub fn attention(&self) -> Option<&AttentionParams> {
        self.stages.iter().find_map(|s| match s {
            Stage::Attention { params, .. } => Some(params),
            _ => None,
        })
    }

    /// The block's router, if it is a mixture-of-experts layer.
    pub fn router(&self) -> Option<&Router> {
        self.stages.iter().find_map(|s| match s {
            Stage::Router { router, .. } => Some(router),
            _ => None,
        })
    }

    /// The block's experts, if it is a mixture-of-experts layer.
    pub fn experts(&self) -> Option<&Experts> {
        self.stages.iter().find_map(|s| match s {
            Stage::Experts { experts, .. } => Some(experts),
            _ => None,
        })
    }

    /// The block's shared experts, if it has them.
    pub fn shared_experts(&self) -> Option<&Experts> {
        self.stages.iter().find_map(|s| match s {
            Stage::SharedExperts { experts, .. } => Some(experts),
            _ => None,
        })
    }

    /// The block's latent attention, if it has one.
    pub fn mla(&self) -> Option<&Mla> {
        self.stages.iter().find_map(|s| match s {
            Stage::LatentQkv { mla, .. } => Some(mla),
            _ => None,
        })
    }

    /// The block's rotary embedding, if it has one.
    pub fn rope(&self) -> Option<&RopeParams> {
        self.stages.iter().find_map(|s| match s {
            Stage::Rope(params) => Some(params),
            _ => None,
        })
    }

    /// What mixes positions in the block in place of attention, if it is a recurrent layer.
    pub fn recurrence(&self) -> Option<Recurrence> {
        self.stages.iter().find_map(|s| match s {
            Stage::ShortConv { conv, .. } => Some(Recurrence::ShortConv(*conv)),
            Stage::DeltaNet { net, .. } => Some(Recurrence::DeltaNet(*net)),
            _ => None,
        })
    }

    /// Whether the block runs a dense FFN.
    pub fn has_dense_ffn(&self) -> bool {
        self.stages.iter().any(|s| matches!(s, Stage::Ffn { .. }))
    }
}
