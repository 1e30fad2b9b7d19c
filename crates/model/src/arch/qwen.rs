//! Qwen2 (q/k/v biases, NeoX RoPE), Qwen3 (per-head q/k RMSNorm, head size from metadata) and
//! Qwen3-MoE (Qwen3 with mixture-of-experts FFNs: softmax, top-k, renormalised). A Qwen3
//! ranker (Qwen3-Reranker as llama.cpp converts it) scores its last token's normed state with
//! `cls.output` (the LM head's "yes" and "no" rows) and a softmax.

use super::{Hparams, moe, with_rank_head, with_rope_style};
use crate::config::{Ffn, Gating, ModelConfig, NormKind, RankHead, RopeStyle};
use crate::error::ModelError;

pub(super) fn qwen2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    Ok(with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox))
}

pub(super) fn qwen3(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = qwen2(hp)?;
    c.qk_norm = true;
    Ok(with_rank_head(c, Some(RankHead::Qwen3)))
}

pub(super) fn qwen3moe(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    // llama.cpp has no classifier for a Qwen3-MoE ranker.
    let mut c = with_rank_head(qwen3(hp)?, None);
    let ffn_dim = moe::expert_ffn_dim(hp, c.ffn_dim)?;
    c.experts = Some(moe::experts(
        hp,
        ffn_dim,
        Gating::SoftmaxTopK,
        Ffn::SiluGated,
    )?);
    Ok(c)
}
