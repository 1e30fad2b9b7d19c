//! One description of a decoder-only transformer: dimensions plus typed features.
//!
//! Every architecture maps its GGUF metadata into a [`ModelConfig`]; at load the configuration
//! produces the [`Transformer`] the forward passes run (see [`ModelConfig::transformer`]), so
//! no executor ever reads the architecture's name.

use rinfer_kernels::block::{
    AttentionParams, Block, Experts, Norm, RopeParams, Router, Stage, Transformer,
};
use rinfer_kernels::ops;

pub use rinfer_kernels::block::{Ffn, Gating, NormKind};

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
    /// YaRN context extension (gpt-oss); `linear_scale` is then its factor.
    pub yarn: Option<YarnScaling>,
}

/// YaRN scaling as the GGUF metadata gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YarnScaling {
    /// The context length the model was trained at before the extension.
    pub original_context: usize,
}

/// Mixture-of-experts feed-forward blocks: a router picks `used` of `count` experts per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeConfig {
    /// Experts per layer.
    pub count: usize,
    /// Experts each token runs (top-k).
    pub used: usize,
    /// Inner width of one expert.
    pub ffn_dim: usize,
    /// How the router's scores become weights.
    pub gating: Gating,
    /// The shape of each expert.
    pub ffn: Ffn,
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
    /// Mixture-of-experts FFNs in place of the dense one on every layer.
    pub experts: Option<MoeConfig>,
    /// A learned sink logit per head joins each attention softmax (gpt-oss).
    pub attention_sinks: bool,
    /// The name of the norm before the FFN: `ffn_norm` (gpt-oss: `post_attention_norm`).
    pub ffn_norm_name: &'static str,
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

    /// The transformer this configuration describes: every layer's stages with their
    /// parameters, built once at load and walked by the CPU and GPU forward passes.
    pub fn transformer(&self) -> Transformer {
        let norm = Norm {
            kind: self.norm,
            eps: self.norm_eps,
        };
        Transformer {
            vocab_size: self.vocab_size,
            hidden: self.hidden,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            ffn_dim: self.ffn_dim,
            embedding_scale: self.embedding_scale,
            blocks: (0..self.layers)
                .map(|layer| self.block(layer, norm))
                .collect(),
            output_norm: norm,
            final_softcap: self.final_softcap,
        }
    }

    /// The stages of `layer`.
    fn block(&self, layer: usize, norm: Norm) -> Block {
        let window = self.window_of(layer);
        let mut stages = vec![Stage::AttentionNorm(norm), Stage::Qkv];
        if self.qk_norm {
            stages.push(Stage::QkNorm { eps: self.norm_eps });
        }
        if let Positional::Rope(rope) = self.positional {
            let freq_base = if window.is_some() {
                rope.base_local
            } else {
                rope.base
            };
            stages.push(Stage::Rope(RopeParams {
                n_rot: rope.dims,
                freq_base,
                freq_scale: 1.0 / rope.linear_scale,
                style: match rope.style {
                    RopeStyle::Interleaved => ops::RopeStyle::Norm,
                    RopeStyle::Neox => ops::RopeStyle::Neox,
                },
                yarn: rope.yarn.map(|yarn| {
                    let orig = yarn.original_context;
                    ops::Yarn::new(rope.dims, freq_base, orig, rope.linear_scale)
                }),
            }));
        }
        stages.push(Stage::Attention(AttentionParams {
            scale: self.attention_scale,
            softcap: self.attn_softcap,
            window,
            sinks: self.attention_sinks,
        }));
        stages.push(Stage::AttentionOutput);
        if self.post_norms {
            stages.push(Stage::PostAttentionNorm(norm));
        }
        if self.parallel_block {
            stages.extend([Stage::Ffn(self.ffn), Stage::ParallelResidual]);
            return Block { stages };
        }
        stages.extend([Stage::AttentionResidual, Stage::FfnNorm(norm)]);
        match self.experts {
            None => stages.push(Stage::Ffn(self.ffn)),
            Some(moe) => stages.extend([
                Stage::Router(Router {
                    experts: moe.count,
                    used: moe.used,
                    gating: moe.gating,
                }),
                Stage::Experts(Experts {
                    ffn: moe.ffn,
                    ffn_dim: moe.ffn_dim,
                }),
            ]),
        }
        if self.post_norms {
            stages.push(Stage::PostFfnNorm(norm));
        }
        stages.push(Stage::FfnResidual);
        Block { stages }
    }
}
