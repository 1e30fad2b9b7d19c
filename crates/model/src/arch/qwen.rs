//! Qwen2 (q/k/v biases, NeoX RoPE), Qwen3 (per-head q/k RMSNorm, head size from metadata) and
//! Qwen3-MoE (Qwen3 with mixture-of-experts FFNs: softmax, top-k, renormalised).

use super::{Hparams, moe, with_rope_style};
use crate::config::{Ffn, Gating, ModelConfig, NormKind, RopeStyle};
use crate::error::ModelError;

pub(super) fn qwen2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    Ok(with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox))
}

pub(super) fn qwen3(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = qwen2(hp)?;
    c.qk_norm = true;
    Ok(c)
}

pub(super) fn qwen3moe(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = qwen3(hp)?;
    let ffn_dim = moe::expert_ffn_dim(hp, c.ffn_dim)?;
    c.experts = Some(moe::experts(
        hp,
        ffn_dim,
        Gating::SoftmaxTopK,
        Ffn::SiluGated,
    )?);
    Ok(c)
}
