//! Hugging Face checkpoints (`config.json` + safetensors): the configuration becomes the GGUF
//! metadata llama.cpp's converter would write, so the same architecture code reads it.
//!
//! One difference is not metadata: llama.cpp's converter permutes the q/k rows of llama models
//! so that RoPE rotates adjacent pairs, while checkpoints keep Hugging Face's rotate-half layout.
//! A checkpoint therefore always runs with [`RopeStyle::Neox`] on its weights as stored.

use rinfer_formats::HfConfig;
use rinfer_formats::gguf::{Metadata, MetadataValue};

use crate::arch::config_from_metadata;
use crate::config::{ModelConfig, Positional, RopeStyle};
use crate::error::ModelError;

/// Hugging Face `model_type`s rinfer loads from safetensors, with their GGUF architecture.
const MODEL_TYPES: &[(&str, &str)] = &[
    ("llama", "llama"),
    ("mistral", "llama"),
    ("qwen2", "qwen2"),
    ("qwen3", "qwen3"),
];

fn missing(field: &str) -> ModelError {
    ModelError::InvalidConfig(format!("config.json has no {field:?}"))
}

/// The GGUF architecture name a checkpoint maps to.
pub(crate) fn gguf_arch(config: &HfConfig) -> Result<&'static str, ModelError> {
    let model_type = config
        .model_type
        .as_deref()
        .ok_or_else(|| missing("model_type"))?;
    MODEL_TYPES
        .iter()
        .find(|(hf, _)| *hf == model_type)
        .map(|(_, arch)| *arch)
        .ok_or_else(|| ModelError::UnknownArchitecture {
            name: model_type.into(),
            supported: MODEL_TYPES
                .iter()
                .map(|(hf, _)| *hf)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The model configuration of a checkpoint whose embedding table has `vocab_size` rows.
pub(crate) fn config_from_hf(hf: &HfConfig, vocab_size: usize) -> Result<ModelConfig, ModelError> {
    let mut config = config_from_metadata(&metadata_from_hf(hf)?, vocab_size)?;
    if let Positional::Rope(rope) = &mut config.positional {
        rope.style = RopeStyle::Neox;
    }
    Ok(config)
}

/// The GGUF metadata of a checkpoint's configuration, under llama.cpp's keys (the
/// architecture's hyperparameters; no tokenizer).
pub(crate) fn metadata_from_hf(hf: &HfConfig) -> Result<Metadata, ModelError> {
    let arch = gguf_arch(hf)?;
    let mut meta = Metadata::default();
    let mut put = |key: &str, value: MetadataValue| {
        meta.insert(key.to_string(), value)
            .map_err(|e| ModelError::InvalidConfig(e.to_string()))
    };
    let u32_of = |value: Option<usize>, field: &str| -> Result<MetadataValue, ModelError> {
        let v = value.ok_or_else(|| missing(field))?;
        u32::try_from(v)
            .map(MetadataValue::U32)
            .map_err(|_| ModelError::InvalidConfig(format!("{field} = {v} is out of range")))
    };
    let key = |suffix: &str| format!("{arch}.{suffix}");
    put("general.architecture", MetadataValue::String(arch.into()))?;
    // Each size: its key, its value, and the config.json field it comes from.
    let sizes = [
        ("embedding_length", hf.hidden_size, "hidden_size"),
        ("block_count", hf.num_hidden_layers, "num_hidden_layers"),
        (
            "feed_forward_length",
            hf.intermediate_size,
            "intermediate_size",
        ),
        (
            "attention.head_count",
            hf.num_attention_heads,
            "num_attention_heads",
        ),
        (
            "attention.head_count_kv",
            hf.num_key_value_heads.or(hf.num_attention_heads),
            "num_key_value_heads",
        ),
    ];
    // The head size only where config.json gives one.
    let head_dim =
        hf.head_dim
            .is_some()
            .then_some(("attention.key_length", hf.head_dim, "head_dim"));
    let context = (
        "context_length",
        hf.max_position_embeddings,
        "max_position_embeddings",
    );
    for (suffix, value, field) in sizes.into_iter().chain(head_dim).chain([context]) {
        put(&key(suffix), u32_of(value, field)?)?;
    }
    let eps = hf.rms_norm_eps.ok_or_else(|| missing("rms_norm_eps"))?;
    put(
        &key("attention.layer_norm_rms_epsilon"),
        MetadataValue::F32(eps as f32),
    )?;
    put(
        &key("rope.freq_base"),
        MetadataValue::F32(hf.rope_theta.unwrap_or(10_000.0) as f32),
    )?;
    if let Some(scaling) = hf.rope_scaling.as_ref().filter(|v| !v.is_null()) {
        let kind = scaling
            .get("rope_type")
            .or_else(|| scaling.get("type"))
            .and_then(|v| v.as_str())
            .unwrap_or("unknown");
        let factor = scaling.get("factor").and_then(|v| v.as_f64());
        match (kind, factor) {
            ("linear", Some(factor)) => {
                put(
                    &key("rope.scaling.type"),
                    MetadataValue::String("linear".into()),
                )?;
                put(
                    &key("rope.scaling.factor"),
                    MetadataValue::F32(factor as f32),
                )?;
            }
            ("default", _) => {}
            _ => {
                return Err(ModelError::InvalidConfig(format!(
                    "RoPE scaling {kind:?} in config.json is not supported for safetensors checkpoints; convert the model to GGUF"
                )));
            }
        }
    }
    Ok(meta)
}
