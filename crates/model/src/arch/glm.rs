//! GLM-4.5 (`glm4moe`): q/k/v biases, per-head q/k RMSNorm that a file may leave out, NeoX
//! RoPE over the leading `rope.dimension_count` dimensions of each head, the FFN normed by
//! `post_attention_norm`, dense FFNs on the leading layers and mixture-of-experts FFNs after
//! them (sigmoid routing with a selection bias, normalised and scaled weights, one shared
//! expert).

use rinfer_transformer::{Presence, Role};

use super::{Hparams, moe, with_rope_style};
use crate::config::{ModelConfig, NormKind, RopeStyle};
use crate::error::ModelError;

pub(super) fn glm4moe(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    if hp.usize_or("nextn_predict_layers", 0)? > 0 {
        return Err(ModelError::InvalidConfig(format!(
            "{} > 0: files with multi-token-prediction layers are not supported yet",
            hp.key("nextn_predict_layers")
        )));
    }
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    c.qk_norm = true;
    c.layout.qk_norm = Presence::Optional;
    c.layout.ffn_norm = Role::PostAttentionNorm;
    c.experts = Some(moe::deepseek_experts(hp)?);
    Ok(c)
}
