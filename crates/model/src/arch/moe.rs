//! The mixture-of-experts hyperparameters the MoE architectures share: expert counts checked
//! against each other, and the expert width.

use super::Hparams;
use crate::config::{Ffn, Gating, MoeConfig, SharedExpertsConfig};
use crate::error::ModelError;

/// Reads `{arch}.expert_count` and `{arch}.expert_used_count`; each expert is `ffn_dim` wide.
/// Counts that contradict each other are an error (llama.cpp aborts on them).
pub(super) fn experts(
    hp: &Hparams<'_>,
    ffn_dim: usize,
    gating: Gating,
    ffn: Ffn,
) -> Result<MoeConfig, ModelError> {
    let count = hp.usize("expert_count")?;
    let used = hp.usize("expert_used_count")?;
    if used == 0 || used > count {
        return Err(ModelError::InvalidConfig(format!(
            "{} = {used} must be between 1 and {} = {count}",
            hp.key("expert_used_count"),
            hp.key("expert_count"),
        )));
    }
    if ffn_dim == 0 {
        return Err(ModelError::InvalidConfig(
            "the expert feed-forward length is zero".into(),
        ));
    }
    Ok(MoeConfig {
        count,
        used,
        ffn_dim,
        gating,
        ffn,
        weights_scale: 1.0,
        selection_bias: false,
        leading_dense: 0,
        shared: None,
        dense_beside: false,
        fused_gate_up: false,
    })
}

/// DeepSeek-V3-style routing as GLM-4.5 and DeepSeek-V2/V3 files describe it: the gating
/// function (`expert_gating_func`: 1 softmax, 2 sigmoid, the softmax when absent), the weights'
/// normalisation (`expert_weights_norm`) and scale (`expert_weights_scale`), the selection
/// bias (sigmoid routers have `exp_probs_b`), the leading dense layers
/// (`leading_dense_block_count`) and `expert_shared_count` shared experts of
/// `expert_feed_forward_length` each.
pub(super) fn deepseek_experts(hp: &Hparams<'_>) -> Result<MoeConfig, ModelError> {
    let ffn_dim = hp.usize("expert_feed_forward_length")?;
    let normalize = match hp.metadata.get(&hp.key("expert_weights_norm")) {
        None => false,
        Some(_) => hp.metadata.get_bool(&hp.key("expert_weights_norm"))?,
    };
    let gating = match hp.usize_or("expert_gating_func", 1)? {
        1 if normalize => Gating::SoftmaxTopK,
        1 => Gating::SoftmaxTopKUnnormalized,
        2 => Gating::Sigmoid { normalize },
        other => {
            return Err(ModelError::InvalidConfig(format!(
                "{} = {other} is not a gating rinfer runs (1: softmax, 2: sigmoid)",
                hp.key("expert_gating_func")
            )));
        }
    };
    if hp.usize_or("expert_group_count", 1)? > 1 {
        return Err(ModelError::InvalidConfig(format!(
            "{} > 1: routing by expert groups is not supported yet",
            hp.key("expert_group_count")
        )));
    }
    let mut moe = experts(hp, ffn_dim, gating, Ffn::SiluGated)?;
    let scale = hp.f32_or("expert_weights_scale", 1.0)?;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(ModelError::InvalidConfig(format!(
            "{} = {scale} is not a positive number",
            hp.key("expert_weights_scale")
        )));
    }
    moe.weights_scale = scale;
    moe.selection_bias = matches!(gating, Gating::Sigmoid { .. });
    moe.leading_dense = hp.usize_or("leading_dense_block_count", 0)?;
    let shared = hp.usize_or("expert_shared_count", 0)?;
    if shared > 0 {
        let ffn_dim = ffn_dim.checked_mul(shared).ok_or_else(|| {
            ModelError::InvalidConfig(format!("{shared} shared experts overflow their width"))
        })?;
        moe.shared = Some(SharedExpertsConfig {
            ffn_dim,
            gated: false,
        });
    }
    Ok(moe)
}

/// The expert width: `{arch}.expert_feed_forward_length`, or else the dense width shared among
/// the used experts (llama.cpp's fallback).
pub(super) fn expert_ffn_dim(hp: &Hparams<'_>, dense: usize) -> Result<usize, ModelError> {
    if hp.has("expert_feed_forward_length") {
        return hp.usize("expert_feed_forward_length");
    }
    let used = hp.usize("expert_used_count")?.max(1);
    Ok(dense / used)
}
