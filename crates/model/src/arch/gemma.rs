//! Gemma 2 and 3: pre and post norms around attention and FFN, GeGLU (tanh GELU), embeddings
//! scaled by sqrt(hidden), sliding-window layers; Gemma 3 adds q/k norms and a separate RoPE
//! base on its sliding-window layers.

use super::{Hparams, with_rope_style};
use crate::config::{Ffn, ModelConfig, NormKind, Positional, RopeStyle, SlidingWindow};
use crate::error::ModelError;

fn common(hp: &Hparams<'_>, default_pattern: usize) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    c.ffn = Ffn::GeluGated;
    c.post_norms = true;
    c.embedding_scale = Some((c.hidden as f32).sqrt());
    // The 27B models scale queries by hidden/heads instead of the head size, as llama.cpp does.
    if matches!(c.layers, 46 | 62) {
        c.attention_scale = 1.0 / ((c.hidden / c.heads) as f32).sqrt();
    }
    c.attn_softcap = hp.f32_opt("attn_logit_softcapping")?;
    c.final_softcap = hp.f32_opt("final_logit_softcapping")?;
    let window = hp.usize_or("attention.sliding_window", 0)?;
    if window > 0 {
        c.sliding_window = Some(SlidingWindow {
            window,
            pattern: hp.usize_or("attention.sliding_window_pattern", default_pattern)?,
        });
    }
    Ok(c)
}

pub(super) fn gemma2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    common(hp, 2)
}

pub(super) fn gemma3(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = common(hp, 6)?;
    c.qk_norm = true;
    if let Positional::Rope(rope) = &mut c.positional {
        rope.base = hp.f32_or("rope.freq_base", 1_000_000.0)?;
        rope.base_local = hp.f32_or("rope.freq_base_swa", 10_000.0)?;
        rope.linear_scale = hp.linear_rope_scale()?;
    }
    Ok(c)
}
