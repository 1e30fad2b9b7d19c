//! GPT-2: learned positions, LayerNorm, fused QKV with bias, GELU, tied output.

use super::Hparams;
use crate::config::{Ffn, ModelConfig, NormKind, Positional, QkvLayout};
use crate::error::ModelError;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = hp.base(NormKind::Layer)?;
    c.ffn = Ffn::Gelu;
    c.positional = Positional::Learned;
    c.layout.qkv = QkvLayout::Fused;
    Ok(c)
}
