//! Hybrid architectures, whose layers mix positions by attention or by a recurrence:
//! LFM2 (short convolutions; a layer with no key/value heads is a convolution layer),
//! Qwen3.5 (gated delta nets beside gated full attention) and Qwen3.5-MoE (Qwen3.5's layers
//! with mixture-of-experts FFNs).

use rinfer_transformer::Role;

use super::{Hparams, moe, with_rope_style};
use crate::config::{
    DeltaNet, Ffn, Gating, ModelConfig, NormKind, Recurrence, RecurrentLayers, RopeStyle,
    SharedExpertsConfig, ShortConv,
};
use crate::error::ModelError;

/// LFM2: `attention.head_count_kv` per layer, 0 on the short-convolution layers; q/k norms,
/// NeoX RoPE over the whole head, the final norm in `token_embd_norm`.
pub(super) fn lfm2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    c.qk_norm = true;
    c.layout.output_norm = Role::TokenEmbdNorm;
    let kv_heads = hp.per_layer_usize("attention.head_count_kv", c.layers)?;
    if let Some(&other) = kv_heads.iter().find(|&&n| n != 0 && n != c.kv_heads) {
        return Err(ModelError::InvalidConfig(format!(
            "attention layers with {other} and {} key/value heads",
            c.kv_heads
        )));
    }
    let taps = hp.usize("shortconv.l_cache")?;
    if taps == 0 {
        return Err(ModelError::InvalidConfig(
            "lfm2.shortconv.l_cache is zero".into(),
        ));
    }
    c.recurrent = Some(RecurrentLayers {
        layers: kv_heads.iter().map(|&n| n == 0).collect(),
        recurrence: Recurrence::ShortConv(ShortConv {
            channels: c.hidden,
            taps,
        }),
    });
    Ok(c)
}

/// Qwen3.5: gated delta-net layers (`attention.recurrent_layers`, or every layer but each
/// `full_attention_interval`-th) and gated full attention with q/k norms and NeoX RoPE over
/// the first `rope.dimension_count` dimensions (the multimodal sections all see the text
/// position, so IMROPE is NeoX for text); the FFN norm is `post_attention_norm`.
pub(super) fn qwen35(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    c.qk_norm = true;
    c.gated_attention = true;
    c.layout.ffn_norm = Role::PostAttentionNorm;
    let sections = hp.metadata.get(&hp.key("rope.dimension_sections"));
    if sections
        .and_then(|v| v.as_array())
        .is_none_or(|s| s.len() != 4)
    {
        return Err(ModelError::InvalidConfig(format!(
            "{} must be an array of 4 counts",
            hp.key("rope.dimension_sections")
        )));
    }
    let layers = match hp.per_layer_bool("attention.recurrent_layers", c.layers)? {
        Some(layers) => layers,
        None => {
            let interval = hp.usize("full_attention_interval")?.max(1);
            (0..c.layers).map(|l| (l + 1) % interval != 0).collect()
        }
    };
    let net = DeltaNet {
        k_heads: hp.usize("ssm.group_count")?,
        v_heads: hp.usize("ssm.time_step_rank")?,
        state: hp.usize("ssm.state_size")?,
        taps: hp.usize("ssm.conv_kernel")?,
        eps: c.norm_eps,
    };
    let inner = hp.usize("ssm.inner_size")?;
    if net.k_heads == 0
        || net.state == 0
        || net.taps == 0
        || !net.v_heads.is_multiple_of(net.k_heads)
        || net.v_heads.checked_mul(net.state) != Some(inner)
    {
        return Err(ModelError::InvalidConfig(format!(
            "delta net of {} q/k heads, {} value heads of {} and {} taps does not fit \
             inner size {inner}",
            net.k_heads, net.v_heads, net.state, net.taps
        )));
    }
    c.recurrent = Some(RecurrentLayers {
        layers,
        recurrence: Recurrence::DeltaNet(net),
    });
    Ok(c)
}

/// Qwen3.5-MoE: Qwen3.5's layers, each FFN a mixture of experts (softmax over
/// `expert_count` router scores, the top `expert_used_count` renormalised, experts
/// `expert_feed_forward_length` wide) beside one shared expert of
/// `expert_shared_feed_forward_length`, scaled per token by `sigmoid(ffn_gate_inp_shexp · h)`.
pub(super) fn qwen35moe(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = qwen35(hp)?;
    let ffn_dim = hp.usize("expert_feed_forward_length")?;
    let mut experts = moe::experts(hp, ffn_dim, Gating::SoftmaxTopK, Ffn::SiluGated)?;
    let shared = hp.usize("expert_shared_feed_forward_length")?;
    if shared == 0 {
        return Err(ModelError::InvalidConfig(format!(
            "{} is zero: Qwen3.5-MoE layers have a shared expert",
            hp.key("expert_shared_feed_forward_length")
        )));
    }
    experts.shared = Some(SharedExpertsConfig {
        ffn_dim: shared,
        gated: true,
    });
    experts.fused_gate_up = true;
    c.experts = Some(experts);
    Ok(c)
}
