//! Llama 2/3, Mistral, TinyLlama: RMSNorm, SwiGLU, GQA, interleaved RoPE (the GGUF converter
//! permutes q/k for it), optional linear scaling or Llama 3 `rope_freqs` factors.

use super::Hparams;
use crate::config::{ModelConfig, NormKind, Positional};
use crate::error::ModelError;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = hp.base(NormKind::Rms)?;
    if let Positional::Rope(rope) = &mut c.positional {
        rope.linear_scale = hp.linear_rope_scale()?;
    }
    Ok(c)
}
