//! DeepSeek-V2/V3 (`deepseek2`): multi-head latent attention and mixture-of-experts FFNs with
//! shared experts after the leading dense layers.
//!
//! Attention runs in the absorbed form llama.cpp uses for files whose `kv_b` projection is
//! split into `attn_k_b` and `attn_v_b`: every position keeps one latent row
//! `[k_pe | norm(c)]` of `rope + kv_lora` values (the file's `attention.key_length`, with
//! `head_count_kv` = 1), and each query head is absorbed into that space, so the KV cache holds
//! that row alone instead of `heads` keys and values. RoPE is the interleaved (NORM) rotation
//! of the leading `rope` dimensions, and scores are scaled by `1/sqrt(key_length_mla)`, the
//! width of a query head before absorption.

use super::{Hparams, moe};
use crate::config::{Mla, ModelConfig, NormKind, Positional};
use crate::error::ModelError;

pub(super) fn deepseek2(hp: &Hparams<'_>) -> Result<ModelConfig, ModelError> {
    let mut c = hp.base(NormKind::Rms)?;
    if !hp.has("attention.key_length_mla") {
        return Err(ModelError::InvalidConfig(format!(
            "{} is missing: this file has the older joint attn_kv_b projection; convert it again \
             with a current llama.cpp so attn_k_b and attn_v_b are split",
            hp.key("attention.key_length_mla")
        )));
    }
    let Positional::Rope(rope) = &mut c.positional else {
        return Err(ModelError::InvalidConfig(
            "latent attention needs rotary positions".into(),
        ));
    };
    rope.linear_scale = hp.linear_rope_scale()?;
    let rope_dims = rope.dims;
    let kv_lora = hp.usize("attention.kv_lora_rank")?;
    let q_head = hp.usize("attention.key_length_mla")?;
    let q_lora = hp.usize_or("attention.q_lora_rank", 0)?;
    let mla = Mla {
        q_lora: (q_lora > 0).then_some(q_lora),
        kv_lora,
        nope: q_head.checked_sub(rope_dims).ok_or_else(|| {
            ModelError::InvalidConfig(format!(
                "a query head of {q_head} values is narrower than its {rope_dims} rotated ones"
            ))
        })?,
        rope: rope_dims,
        v_head: hp.usize("attention.value_length_mla")?,
    };
    if kv_lora == 0 || mla.v_head == 0 || mla.latent() != c.head_dim || c.kv_heads != 1 {
        return Err(ModelError::InvalidConfig(format!(
            "latent attention needs one kv head of kv_lora_rank + rope = {} values, and the file \
             says {} of {}",
            mla.latent(),
            c.kv_heads,
            c.head_dim
        )));
    }
    c.attention_scale = 1.0 / (q_head as f32).sqrt();
    c.mla = Some(mla);
    let mut experts = moe::deepseek_experts(hp)?;
    experts.fused_gate_up = true;
    c.experts = Some(experts);
    Ok(c)
}
