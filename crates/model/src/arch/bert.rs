//! BERT-style encoders for embeddings: token type 0 added to the embeddings, a LayerNorm of
//! them, bidirectional attention, a post-norm block (`x = LN(x + attn)`, `x = LN(x + ffn)`)
//! and no LM head; a ranker (cross-encoder) scores its `[CLS]` state with the classifier `cls`
//! (tanh) and `cls.output`.
//!
//! - `bert`: learned positions, q/k/v and every projection with biases, a plain GELU FFN.
//! - `nomic-bert` (nomic-embed-text): rotary positions (NEOX pairs, `rope.freq_base`), one
//!   fused `attn_qkv`, a SwiGLU FFN (`ffn_gate`, `ffn_up`, `ffn_down`), biases only where the
//!   file has them (the released models have none).

use rinfer_transformer::Presence;

use super::{Hparams, with_rank_head, with_rope_style};
use crate::config::{Ffn, ModelConfig, NormKind, Positional, QkvLayout, RankHead, RopeStyle};
use crate::error::ModelError;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = encoder(hp)?;
    c.ffn = Ffn::Gelu;
    c.positional = Positional::Learned;
    c.layout.biases = Presence::Required;
    Ok(c)
}

pub(super) fn nomic_bert(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(encoder(hp)?, RopeStyle::Neox);
    c.ffn = Ffn::SiluGated;
    c.layout.qkv = QkvLayout::Fused;
    Ok(c)
}

/// What every BERT-style encoder shares: LayerNorm, post-norm, bidirectional by default.
fn encoder(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = hp.base(NormKind::Layer)?;
    c.post_norm = true;
    c.causal = hp.bool_or("attention.causal", false)?;
    Ok(with_rank_head(c, Some(RankHead::Bert)))
}
