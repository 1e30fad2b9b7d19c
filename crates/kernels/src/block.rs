//! The transformer as data: what a decoder-only model computes, described once and run by each
//! executor (the CPU forward pass of `rinfer-model`, the CUDA step builder of `rinfer-cuda`).
//!
//! A [`Transformer`] holds the dimensions, the embedding scale, one [`Block`] per layer and the
//! head. A block is the list of [`Stage`]s it runs in order, each with its parameters; an
//! executor walks the list with one `match`. Architectures differ only in these lists and their
//! parameters, never in code.
//!
//! The stages read and write a few activation buffers, each `[rows, width]`: `x` the residual
//! stream, `h` the normed input (and then the FFN's output), `q`, `k`, `v` the projections,
//! `attn` the attention output and `out` its projection.
//!
//! A mixture-of-experts layer replaces [`Stage::Ffn`] by [`Stage::Router`], which picks each
//! row's experts and their weights, and [`Stage::Experts`], which runs only those experts and
//! sums their outputs into `h`.
//!
//! ```
//! use rinfer_kernels::block::{Block, Ffn, Norm, NormKind, Stage};
//!
//! let norm = Norm { kind: NormKind::Rms, eps: 1e-6 };
//! // A block without positions or attention parameters, to show the shape of the list.
//! let block = Block {
//!     stages: vec![
//!         Stage::AttentionNorm(norm),
//!         Stage::Qkv,
//!         Stage::AttentionOutput,
//!         Stage::AttentionResidual,
//!         Stage::FfnNorm(norm),
//!         Stage::Ffn(Ffn::SiluGated),
//!         Stage::FfnResidual,
//!     ],
//! };
//! assert_eq!(block.attention(), None);
//! ```

pub use crate::ops::{AttentionParams, Gating, RopeParams, RopeStyle, Yarn};

/// How hidden states are normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// `x / rms(x) * w`.
    Rms,
    /// `(x - mean) / std * w + b`.
    Layer,
}

/// A normalisation of rows of the hidden width: its kind and epsilon.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    /// RMSNorm or LayerNorm.
    pub kind: NormKind,
    /// Added to the variance.
    pub eps: f32,
}

/// The feed-forward block's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ffn {
    /// `down(silu(gate(h)) * up(h))`.
    SiluGated,
    /// `down(gelu_tanh(gate(h)) * up(h))`.
    GeluGated,
    /// `down(gelu_tanh(up(h)))`, no gate.
    Gelu,
    /// `down(swiglu_clamped(gate(h) + b, up(h) + b)) + b`: gpt-oss's clamped SwiGLU
    /// ([`crate::ops::swiglu_clamped_inplace`]).
    ClampedSwiGlu,
}

/// A mixture-of-experts router: how many experts a layer has, how many each row runs, and how
/// their weights are formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Router {
    /// Experts of the layer.
    pub experts: usize,
    /// Experts each row runs (top-k).
    pub used: usize,
    /// From scores to weights.
    pub gating: Gating,
}

/// The experts of a mixture-of-experts layer: each is a gated feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Experts {
    /// The shape of each expert.
    pub ffn: Ffn,
    /// Inner width of one expert.
    pub ffn_dim: usize,
}

/// One step of a decoder block, on the `n` rows of a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stage {
    /// `h = norm(x)` with the layer's attention norm.
    AttentionNorm(Norm),
    /// `q`, `k`, `v` projected from `h` (separate or fused matrices, as the weights come).
    Qkv,
    /// Every head of `q` and of `k` RMS-normed with the layer's q and k scales.
    QkNorm {
        /// Added to the variance.
        eps: f32,
    },
    /// `q` and `k` rotated at each row's position (with the model's per-frequency factors, if
    /// it has them).
    Rope(RopeParams),
    /// Each row's `k` and `v` stored in its sequence's KV cache at its position, then
    /// `attn = attention(q, cache)`.
    Attention(AttentionParams),
    /// `out = attn_output(attn)`.
    AttentionOutput,
    /// `out = norm(out)` with the layer's post-attention norm.
    PostAttentionNorm(Norm),
    /// `x += out`.
    AttentionResidual,
    /// `h = norm(x)` with the layer's FFN norm.
    FfnNorm(Norm),
    /// `h = ffn(h)`.
    Ffn(Ffn),
    /// Each row's experts and their weights, from the router's scores of `h`.
    Router(Router),
    /// `h = Σ weight_e · expert_e(h)` over each row's routed experts, in the router's order.
    Experts(Experts),
    /// `h = norm(h)` with the layer's post-FFN norm.
    PostFfnNorm(Norm),
    /// `x += h`.
    FfnResidual,
    /// `x += out + h`: attention and FFN both read the normed input (a parallel block).
    ParallelResidual,
}

/// The stages of one decoder layer, in the order they run.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The stages.
    pub stages: Vec<Stage>,
}

impl Block {
    /// The parameters of the block's attention, if it has one.
    pub fn attention(&self) -> Option<&AttentionParams> {
        self.stages.iter().find_map(|s| match s {
            Stage::Attention(params) => Some(params),
            _ => None,
        })
    }

    /// The block's router, if it is a mixture-of-experts layer.
    pub fn router(&self) -> Option<&Router> {
        self.stages.iter().find_map(|s| match s {
            Stage::Router(router) => Some(router),
            _ => None,
        })
    }

    /// The block's experts, if it is a mixture-of-experts layer.
    pub fn experts(&self) -> Option<&Experts> {
        self.stages.iter().find_map(|s| match s {
            Stage::Experts(experts) => Some(experts),
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
}

/// A decoder-only transformer: token embedding (times `embedding_scale`, plus learned positions
/// when the model has them), the blocks, then `logits = softcap(lm_head(output_norm(x)) + b)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformer {
    /// Vocabulary size (rows of the embedding table and of the LM head).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (fewer than `heads` under grouped-query attention).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Inner width of the feed-forward block.
    pub ffn_dim: usize,
    /// Token embeddings are multiplied by this.
    pub embedding_scale: Option<f32>,
    /// One block per layer.
    pub blocks: Vec<Block>,
    /// The norm before the LM head.
    pub output_norm: Norm,
    /// `tanh` soft-capping of the logits.
    pub final_softcap: Option<f32>,
}

impl Transformer {
    /// Number of decoder layers.
    pub fn layers(&self) -> usize {
        self.blocks.len()
    }

    /// Width of all query heads together.
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of all key (or value) heads together.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// The attention window of `layer`, if it slides.
    pub fn window_of(&self, layer: usize) -> Option<usize> {
        self.blocks
            .get(layer)
            .and_then(Block::attention)
            .and_then(|a| a.window)
    }
}
