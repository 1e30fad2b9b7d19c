//! One description of a decoder-only transformer: dimensions plus typed features.
//!
//! Every architecture maps its GGUF metadata into a [`ModelConfig`]; the forward pass reads only
//! this struct, never the architecture's name.

/// How hidden states are normalised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormKind {
    /// `x / rms(x) * w`.
    Rms,
    /// `(x - mean) / std * w + b`.
    Layer,
}

/// The feed-forward block's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ffn {
    /// `down(silu(gate(h)) * up(h))`.
    SiluGated,
    /// `down(gelu_tanh(gate(h)) * up(h))`.
    GeluGated,
    /// `down(gelu(up(h) + b) ) + b`, no gate.
    Gelu,
}

/// Which dimension pairs RoPE rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)` (llama.cpp's NORM mode; GGUF llama q/k are permuted for it).
    Interleaved,
    /// Pairs `(i, i + n_rot/2)` (GPT-NeoX).
    Neox,
}

/// How positions are encoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Positional {
    /// Rotary embeddings on q and k.
    Rope(Rope),
    /// A learned `position_embd` table added to the token embeddings.
    Learned,
}

/// Rotary embedding parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// Pair layout.
    pub style: RopeStyle,
    /// Leading dimensions of each head that rotate (the rest pass through).
    pub dims: usize,
    /// Frequency base on full-attention layers.
    pub base: f32,
    /// Frequency base on sliding-window layers.
    pub base_local: f32,
    /// Positions are divided by this (linear scaling; 1 for none). Per-frequency factors
    /// (Llama 3.1's long-context scaling) come from the optional `rope_freqs` tensor instead.
    pub linear_scale: f32,
}

/// Sliding-window attention on some layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    /// A query may attend keys at most `window - 1` positions back.
    pub window: usize,
    /// Layer `i` uses the window iff `i % pattern < pattern - 1` (pattern 1: every layer).
    pub pattern: usize,
}

impl SlidingWindow {
    /// Whether layer `layer` is a sliding-window layer.
    pub fn applies_to(&self, layer: usize) -> bool {
        self.pattern <= 1 || layer % self.pattern < self.pattern - 1
    }
}

/// Everything the forward pass needs to know about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The GGUF architecture name, for messages.
    pub arch: String,
    /// Vocabulary size (rows of the embedding table).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Number of decoder blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (fewer than `heads` under GQA).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Inner width of the feed-forward block.
    pub ffn_dim: usize,
    /// The longest context the model was trained for.
    pub context_length: usize,
    /// Normalisation kind.
    pub norm: NormKind,
    /// Normalisation epsilon.
    pub norm_eps: f32,
    /// Feed-forward shape.
    pub ffn: Ffn,
    /// Position encoding.
    pub positional: Positional,
    /// Per-head RMSNorm of q and k before RoPE.
    pub qk_norm: bool,
    /// Attention and FFN both read the same normed input and add to the residual together (phi2).
    pub parallel_block: bool,
    /// Extra norms on the attention and FFN outputs before the residual add (gemma2/3).
    pub post_norms: bool,
    /// Token embeddings are multiplied by this (gemma: sqrt(hidden)).
    pub embedding_scale: Option<f32>,
    /// Attention score scale, usually `1/sqrt(head_dim)`.
    pub attention_scale: f32,
    /// `tanh` soft-capping of attention scores.
    pub attn_softcap: Option<f32>,
    /// `tanh` soft-capping of the final logits.
    pub final_softcap: Option<f32>,
    /// Sliding-window attention.
    pub sliding_window: Option<SlidingWindow>,
}

impl ModelConfig {
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
        self.sliding_window
            .filter(|sw| sw.applies_to(layer))
            .map(|sw| sw.window)
    }
}
