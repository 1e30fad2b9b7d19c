//! The model as the GPU backend receives it: the [`Transformer`] the forward pass runs (the
//! description the CPU forward pass runs too) and borrowed host views of every weight, in its
//! stored block format.
//!
//! `rinfer-model` sits above this crate, so it builds a [`HostModel`] from its own `Weights`;
//! the field names follow that type one to one.

use std::borrow::Cow;

use rinfer_formats::GgmlType;
use rinfer_kernels::block::Transformer;

/// A weight matrix `[rows, cols]`, each row stored in `ty`'s blocks.
#[derive(Clone, Debug)]
pub struct HostMatrix<'a> {
    /// The tensor's name, for messages.
    pub name: String,
    /// Block format.
    pub ty: GgmlType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// All rows' bytes.
    pub data: &'a [u8],
}

/// `y = W·x + b`.
#[derive(Clone, Debug)]
pub struct HostLinear<'a> {
    /// The matrix.
    pub weight: HostMatrix<'a>,
    /// `[rows]`.
    pub bias: Option<&'a [f32]>,
}

/// A norm's scale and, for LayerNorm, its bias.
#[derive(Clone, Copy, Debug)]
pub struct HostNorm<'a> {
    /// `[width]`.
    pub weight: &'a [f32],
    /// `[width]`.
    pub bias: Option<&'a [f32]>,
}

/// How q, k and v are projected.
#[derive(Clone, Debug)]
pub enum HostQkv<'a> {
    /// Three matrices.
    Separate {
        /// `[q_dim, hidden]`.
        q: HostLinear<'a>,
        /// `[kv_dim, hidden]`.
        k: HostLinear<'a>,
        /// `[kv_dim, hidden]`.
        v: HostLinear<'a>,
    },
    /// `[q_dim + 2 kv_dim, hidden]`, output q | k | v.
    Fused(HostLinear<'a>),
}

/// The FFN's first projection(s).
#[derive(Clone, Debug)]
pub enum HostFfnUp<'a> {
    /// Separate gate and up.
    Gated {
        /// `[ffn, hidden]`.
        gate: HostLinear<'a>,
        /// `[ffn, hidden]`.
        up: HostLinear<'a>,
    },
    /// `[2 ffn, hidden]`, output gate | up.
    FusedGated(HostLinear<'a>),
    /// `[ffn, hidden]`, no gate.
    Plain(HostLinear<'a>),
}

/// One projection of every expert: `experts` matrices of `[rows, cols]` stacked, expert `e`'s
/// bytes at `e * data.len() / experts` (borrowed when the file stores them so, one copy
/// otherwise).
#[derive(Clone, Debug)]
pub struct HostStacked<'a> {
    /// The tensor's name, for messages.
    pub name: String,
    /// Block format.
    pub ty: GgmlType,
    /// How many experts.
    pub experts: usize,
    /// Output features of one expert.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Every expert's rows, expert after expert.
    pub data: Cow<'a, [u8]>,
    /// `[experts, rows]`.
    pub bias: Option<Cow<'a, [f32]>>,
}

/// A mixture-of-experts block's weights.
#[derive(Clone, Debug)]
pub struct HostExperts<'a> {
    /// `[experts, hidden]`: one score per expert.
    pub router: HostLinear<'a>,
    /// `[expert_ffn, hidden]` per expert.
    pub gate: HostStacked<'a>,
    /// `[expert_ffn, hidden]` per expert.
    pub up: HostStacked<'a>,
    /// `[hidden, expert_ffn]` per expert.
    pub down: HostStacked<'a>,
}

/// A layer's feed-forward weights.
#[derive(Clone, Debug)]
pub enum HostFfn<'a> {
    /// One FFN every token runs.
    Dense {
        /// The first projection(s).
        up: HostFfnUp<'a>,
        /// `[hidden, ffn]`.
        down: HostLinear<'a>,
    },
    /// Experts, of which a router picks a few per token.
    Experts(HostExperts<'a>),
}

/// One decoder block.
#[derive(Clone, Debug)]
pub struct HostLayer<'a> {
    /// Norm before attention (and the FFN in parallel blocks).
    pub attn_norm: HostNorm<'a>,
    /// q, k, v.
    pub qkv: HostQkv<'a>,
    /// Per-head RMSNorm scales of q and k, `[head_dim]` each.
    pub qk_norm: Option<(&'a [f32], &'a [f32])>,
    /// `[hidden, q_dim]`.
    pub attn_output: HostLinear<'a>,
    /// Norm of the attention output.
    pub post_attn_norm: Option<HostNorm<'a>>,
    /// Per-head attention sink logits, `[heads]` (gpt-oss).
    pub attn_sinks: Option<&'a [f32]>,
    /// Norm before the FFN (absent in parallel blocks).
    pub ffn_norm: Option<HostNorm<'a>>,
    /// The FFN, dense or experts.
    pub ffn: HostFfn<'a>,
    /// Norm of the FFN output.
    pub post_ffn_norm: Option<HostNorm<'a>>,
}

/// A whole model, borrowed from the host.
#[derive(Clone, Debug)]
pub struct HostModel<'a> {
    /// What the forward pass runs: dimensions and every layer's stages.
    pub config: Transformer,
    /// `[vocab, hidden]`.
    pub token_embd: HostMatrix<'a>,
    /// `[positions, hidden]` (learned positions only).
    pub position_embd: Option<HostMatrix<'a>>,
    /// Per-frequency RoPE divisors, `[rope dims / 2]`.
    pub rope_freqs: Option<&'a [f32]>,
    /// The decoder blocks.
    pub layers: Vec<HostLayer<'a>>,
    /// Final norm.
    pub output_norm: HostNorm<'a>,
    /// `[vocab, hidden]` (the token embedding when tied).
    pub lm_head: HostMatrix<'a>,
    /// `[vocab]`.
    pub output_bias: Option<&'a [f32]>,
}
