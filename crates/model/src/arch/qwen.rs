//! Qwen2 (q/k/v biases, NeoX RoPE) and Qwen3 (per-head q/k RMSNorm, head size from metadata).

use super::{Hparams, with_rope_style};
use crate::config::{ModelConfig, NormKind, RopeStyle};
use crate::error::ModelError;

pub(super) fn qwen2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    Ok(with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox))
}

pub(super) fn qwen3(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = qwen2(hp)?;
    c.qk_norm = true;
    Ok(c)
}
