//! Phi-2 (parallel attention and FFN from one LayerNorm, partial NeoX RoPE, fused QKV with bias,
//! GELU, output bias) and Phi-3 (fused QKV and gate/up, RMSNorm, SwiGLU).

use super::{Hparams, with_rope_style};
use crate::config::{Ffn, ModelConfig, NormKind, QkvLayout, RopeStyle, SlidingWindow};
use crate::error::ModelError;

pub(super) fn phi2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Layer)?, RopeStyle::Neox);
    c.ffn = Ffn::Gelu;
    c.parallel_block = true;
    c.layout.qkv = QkvLayout::Fused;
    Ok(c)
}

pub(super) fn phi3(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    c.layout.qkv = QkvLayout::Fused;
    c.layout.fused_gate_up = true;
    let window = hp.usize_or("attention.sliding_window", 0)?;
    if window > 0 {
        c.sliding_window = Some(SlidingWindow { window, pattern: 1 });
    }
    Ok(c)
}
