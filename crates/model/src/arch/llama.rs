//! Llama 2/3, Mistral, TinyLlama: RMSNorm, SwiGLU, GQA, interleaved RoPE (the GGUF converter
//! permutes q/k for it), optional linear scaling or Llama 3 `rope_freqs` factors. A non-zero
//! `llama.expert_count` makes every FFN a mixture of experts (Mixtral: softmax, top-k,
//! renormalised, each expert as wide as `feed_forward_length`).

use super::{Hparams, moe};
use crate::config::{Ffn, Gating, ModelConfig, NormKind, Positional};
use crate::error::ModelError;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = hp.base(NormKind::Rms)?;
    if let Positional::Rope(rope) = &mut c.positional {
        rope.linear_scale = hp.linear_rope_scale()?;
    }
    if hp.usize_or("expert_count", 0)? > 0 {
        c.experts = Some(moe::experts(
            hp,
            c.ffn_dim,
            Gating::SoftmaxTopK,
            Ffn::SiluGated,
        )?);
    }
    Ok(c)
}
