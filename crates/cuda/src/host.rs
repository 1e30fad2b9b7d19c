//! The model as the GPU backend receives it: a configuration and borrowed host views of every
//! weight, in its stored block format.
//!
//! `rinfer-model` sits above this crate, so it builds a [`HostModel`] from its own `ModelConfig`
//! and `Weights`; the field names follow those types one to one.

use rinfer_formats::GgmlType;

/// How hidden states are normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    /// `x / rms(x) * w`.
    Rms,
    /// `(x - mean) / std * w + b`.
    Layer,
}

/// The feed-forward activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnKind {
    /// `silu(gate) * up`.
    SiluGated,
    /// `gelu_tanh(gate) * up`.
    GeluGated,
    /// `gelu_tanh(up)`, no gate.
    Gelu,
}

/// Rotary embedding parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeConfig {
    /// Pairs `(i, i + dims/2)` (NeoX) rather than `(2i, 2i+1)`.
    pub neox: bool,
    /// Leading dimensions of each head that rotate.
    pub dims: usize,
    /// Frequency base on full-attention layers.
    pub base: f32,
    /// Frequency base on sliding-window layers.
    pub base_local: f32,
    /// Positions are divided by this.
    pub linear_scale: f32,
}

/// Sliding-window attention: layer `i` slides iff `pattern <= 1 || i % pattern < pattern - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// A query attends keys at most `size - 1` positions back.
    pub size: usize,
    /// The layer pattern.
    pub pattern: usize,
}

/// What the GPU forward pass reads about a model (a mirror of `rinfer_model::ModelConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct GpuConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Decoder blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Inner width of the feed-forward block.
    pub ffn_dim: usize,
    /// Normalisation kind.
    pub norm: Norm,
    /// Normalisation epsilon.
    pub norm_eps: f32,
    /// Feed-forward activation.
    pub ffn: FfnKind,
    /// Rotary embeddings (`None`: learned positions).
    pub rope: Option<RopeConfig>,
    /// Attention and FFN read the same normed input and add to the residual together.
    pub parallel_block: bool,
    /// Token embeddings are multiplied by this.
    pub embedding_scale: Option<f32>,
    /// Attention score scale.
    pub attention_scale: f32,
    /// `tanh` soft-capping of attention scores.
    pub attn_softcap: Option<f32>,
    /// `tanh` soft-capping of the final logits.
    pub final_softcap: Option<f32>,
    /// Sliding-window attention.
    pub sliding_window: Option<Window>,
}

impl GpuConfig {
    /// Width of all query heads.
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of all key (or value) heads.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// The attention window of `layer`, if it slides.
    pub fn window_of(&self, layer: usize) -> Option<usize> {
        self.sliding_window
            .filter(|w| w.pattern <= 1 || layer % w.pattern < w.pattern - 1)
            .map(|w| w.size)
    }
}

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
    /// Norm before the FFN (absent in parallel blocks).
    pub ffn_norm: Option<HostNorm<'a>>,
    /// The FFN's first projection(s).
    pub ffn_up: HostFfnUp<'a>,
    /// `[hidden, ffn]`.
    pub ffn_down: HostLinear<'a>,
    /// Norm of the FFN output.
    pub post_ffn_norm: Option<HostNorm<'a>>,
}

/// A whole model, borrowed from the host.
#[derive(Clone, Debug)]
pub struct HostModel<'a> {
    /// Dimensions and features.
    pub config: GpuConfig,
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
