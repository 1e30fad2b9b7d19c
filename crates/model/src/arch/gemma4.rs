//! Gemma 4: Gemma 3's block (pre and post norms, q/k norms, GeGLU, embeddings scaled by
//! sqrt(hidden)) with layers that differ in their heads: sliding-window layers have their own
//! head size, kv heads and RoPE (`*_swa` keys); full-attention layers rotate proportionally
//! (`rope_freqs` divides the angles; pairs past the rotated part get a huge divisor) and may
//! have no `attn_v`, their values then being the raw keys. Every value head is RMS-normed
//! without a scale, scores are not scaled (the q/k norms do it), each layer adds its
//! per-layer input (PLE) and scales its output by `layer_output_scale`, and the logits are
//! soft-capped.
//!
//! The small models (E2B, E4B) share KV caches: the last `attention.shared_kv_layers` layers
//! project only queries and attend over the cache of the last earlier layer of their kind
//! (sliding or full), keeping none of their own. The mixture-of-experts models (26B-A4B) run
//! the dense FFN beside the experts on every layer (see `config::experts_beside_dense`).

use super::{Hparams, moe, with_rope_style};
use crate::config::{
    Ffn, Gating, Heads, LayerAttention, ModelConfig, NormKind, Positional, QkvLayout, RopeStyle,
    SlidingWindow,
};
use crate::error::ModelError;

pub(super) fn config(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = with_rope_style(hp.base(NormKind::Rms)?, RopeStyle::Neox);
    if hp.usize_or("expert_count", 0)? > 0 {
        let ffn_dim = hp.usize("expert_feed_forward_length")?;
        let mut experts = moe::experts(hp, ffn_dim, Gating::SoftmaxTopK, Ffn::GeluGated)?;
        experts.dense_beside = true;
        experts.fused_gate_up = true;
        c.experts = Some(experts);
    }
    c.ffn = Ffn::GeluGated;
    c.post_norms = true;
    c.qk_norm = true;
    c.value_norm = true;
    c.embedding_scale = Some((c.hidden as f32).sqrt());
    c.attention_scale = 1.0;
    c.final_softcap = hp.f32_opt("final_logit_softcapping")?;
    c.layout.qkv = QkvLayout::OptionalValue;
    c.layer_output_scale = true;
    let width = hp.usize_or("embedding_length_per_layer_input", 0)?;
    c.per_layer_input = (width > 0).then_some(width);

    let layers = c.layers;
    let sliding = hp
        .per_layer_bool("attention.sliding_window_pattern", layers)?
        .unwrap_or_else(|| vec![false; layers]);
    let kv_heads = if hp.has("attention.head_count_kv") {
        hp.per_layer_usize("attention.head_count_kv", layers)?
    } else {
        vec![c.heads; layers]
    };
    let head_dim_local = hp.usize_or("attention.key_length_swa", c.head_dim)?;
    let value_dim_local = hp.usize_or("attention.value_length_swa", head_dim_local)?;
    if value_dim_local != head_dim_local {
        return Err(ModelError::InvalidConfig(format!(
            "sliding-window key length {head_dim_local} differs from value length \
             {value_dim_local}"
        )));
    }
    let sources = kv_sources(&sliding, hp.usize_or("attention.shared_kv_layers", 0)?)?;
    c.layer_attention = Some(
        (0..layers)
            .map(|layer| LayerAttention {
                kv_source: sources[layer],
                heads: Heads {
                    heads: c.heads,
                    kv_heads: kv_heads[layer],
                    head_dim: if sliding[layer] {
                        head_dim_local
                    } else {
                        c.head_dim
                    },
                },
                sliding: sliding[layer],
            })
            .collect(),
    );
    if sliding.contains(&true) {
        c.sliding_window = Some(SlidingWindow {
            window: hp.usize("attention.sliding_window")?,
            pattern: 1,
        });
    }
    if let Positional::Rope(rope) = &mut c.positional {
        rope.base_local = hp.f32_or("rope.freq_base_swa", 10_000.0)?;
        rope.dims_local = hp.usize_or("rope.dimension_count_swa", head_dim_local)?;
    }
    Ok(c)
}

/// Per layer, the earlier layer whose KV cache it reads: each of the last `shared` layers
/// reads the last layer before them of its own kind (as the reference implementation picks
/// it; llama.cpp takes the last two such layers to be a sliding then a full one, which every
/// published model's pattern satisfies).
fn kv_sources(sliding: &[bool], shared: usize) -> Result<Vec<Option<usize>>, ModelError> {
    let layers = sliding.len();
    let first = layers
        .checked_sub(shared)
        .filter(|&f| f > 0)
        .ok_or_else(|| {
            ModelError::InvalidConfig(format!(
                "attention.shared_kv_layers = {shared} leaves no layer of the {layers} with a KV \
             cache of its own"
            ))
        })?;
    (0..layers)
        .map(|layer| {
            if layer < first {
                return Ok(None);
            }
            let kind = sliding[layer];
            let source = (0..first).rev().find(|&l| sliding[l] == kind);
            match source {
                Some(source) => Ok(Some(source)),
                None => Err(ModelError::InvalidConfig(format!(
                    "layer {layer} shares the KV cache of an earlier {} layer, and none of \
                     the first {first} is one",
                    if kind {
                        "sliding-window"
                    } else {
                        "full-attention"
                    }
                ))),
            }
        })
        .collect()
}
