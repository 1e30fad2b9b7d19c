//! gpt-oss: q/k/v/o biases, NeoX RoPE with YaRN scaling, sliding-window attention on every
//! other layer (from layer 0), a learned sink logit per head, and mixture-of-experts FFNs
//! (top-k by raw router score, softmax over the picked, clamped SwiGLU, biases everywhere)
//! normed by `post_attention_norm`.

use super::{Hparams, moe, with_rope_style};
use crate::config::{
    Ffn, Gating, ModelConfig, NormKind, Positional, RopeStyle, SlidingWindow, YarnScaling,
};
use crate::error::ModelError;
use rinfer_transformer::Role;

/// llama.cpp's sliding-window pattern for gpt-oss (the GGUF has no key for it).
const SLIDING_WINDOW_PATTERN: usize = 2;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    if let Positional::Rope(rope) = &mut c.positional
        && let Some((factor, original_context)) = hp.yarn_scaling()?
    {
        rope.linear_scale = factor;
        rope.yarn = Some(YarnScaling { original_context });
    }
    c.sliding_window = Some(SlidingWindow {
        window: hp.usize("attention.sliding_window")?,
        pattern: SLIDING_WINDOW_PATTERN,
    });
    c.attention_sinks = true;
    c.layout.ffn_norm = Role::PostAttentionNorm;
    let ffn_dim = moe::expert_ffn_dim(hp, c.ffn_dim)?;
    c.experts = Some(moe::experts(
        hp,
        ffn_dim,
        Gating::TopKSoftmax,
        Ffn::ClampedSwiGlu,
    )?);
    Ok(c)
}
