//! The mixture-of-experts hyperparameters the MoE architectures share: expert counts checked
//! against each other, and the expert width.

use super::Hparams;
use crate::config::{Ffn, Gating, MoeConfig};
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
    })
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
