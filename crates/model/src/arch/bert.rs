//! BERT (an encoder for embeddings): learned positions plus token type 0, a LayerNorm of the
//! embeddings, bidirectional attention, q/k/v and every projection with biases, a post-norm
//! block (`x = LN(x + attn)`, `x = LN(x + ffn)`), a plain GELU FFN and no LM head; a
//! ranker (cross-encoder) scores its `[CLS]` state with the classifier `cls` (tanh) and
//! `cls.output`.

use rinfer_transformer::Presence;

use super::{Hparams, with_rank_head};
use crate::config::{Ffn, ModelConfig, NormKind, Positional, RankHead};
use crate::error::ModelError;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = hp.base(NormKind::Layer)?;
    c.ffn = Ffn::Gelu;
    c.positional = Positional::Learned;
    c.layout.biases = Presence::Required;
    c.post_norm = true;
    c.causal = hp.bool_or("attention.causal", false)?;
    Ok(with_rank_head(c, Some(RankHead::Bert)))
}
