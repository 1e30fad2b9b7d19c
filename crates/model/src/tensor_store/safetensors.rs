//! The tensors of a Hugging Face safetensors checkpoint under their GGUF names.
//!
//! Tensors stay in the memory map when their bytes are aligned for their element type (as every
//! common writer leaves them); a misaligned one is copied once into an aligned buffer.

use std::collections::HashMap;
use std::sync::Arc;

use rinfer_formats::GgmlType;
use rinfer_formats::safetensors::{Dtype, SafetensorsModel};
use rinfer_transformer::{Role, TensorName};

use super::{StoredTensor, TensorStore};
use crate::error::ModelError;
use crate::weights::ByteSource;

/// Hugging Face names of the per-layer tensors of llama-family checkpoints (after
/// `model.layers.{i}.`), with their roles.
const LAYER_NAMES: &[(&str, Role)] = &[
    ("input_layernorm", Role::AttnNorm),
    ("self_attn.q_proj", Role::AttnQ),
    ("self_attn.k_proj", Role::AttnK),
    ("self_attn.v_proj", Role::AttnV),
    ("self_attn.o_proj", Role::AttnOutput),
    ("self_attn.q_norm", Role::AttnQNorm),
    ("self_attn.k_norm", Role::AttnKNorm),
    ("post_attention_layernorm", Role::FfnNorm),
    ("mlp.gate_proj", Role::FfnGate),
    ("mlp.up_proj", Role::FfnUp),
    ("mlp.down_proj", Role::FfnDown),
];

/// Model-level tensors.
const MODEL_NAMES: &[(&str, Role)] = &[
    ("model.embed_tokens", Role::TokenEmbd),
    ("model.norm", Role::OutputNorm),
    ("lm_head", Role::Output),
];

/// Buffers that need no tensor: RoPE frequencies some checkpoints store.
fn is_derived_buffer(hf_name: &str) -> bool {
    hf_name.ends_with("rotary_emb.inv_freq")
}

/// The GGUF name of a Hugging Face tensor name, if it is one rinfer knows.
fn gguf_name(hf_name: &str) -> Option<String> {
    let (stem, suffix) = hf_name.rsplit_once('.')?;
    let name = if let Some(&(_, role)) = MODEL_NAMES.iter().find(|(hf, _)| *hf == stem) {
        TensorName::model(role)
    } else {
        let rest = stem.strip_prefix("model.layers.")?;
        let (layer, part) = rest.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let &(_, role) = LAYER_NAMES.iter().find(|(hf, _)| *hf == part)?;
        TensorName::layer(role, layer)
    };
    match suffix {
        "weight" => Some(name.to_string()),
        "bias" => Some(name.bias().to_string()),
        _ => None,
    }
}

/// A safetensors checkpoint's tensors, renamed.
pub(crate) struct SafetensorsStore {
    model: Arc<SafetensorsModel>,
    /// GGUF name → Hugging Face name.
    names: HashMap<String, String>,
}

impl SafetensorsStore {
    /// Maps every tensor of `model`; a tensor rinfer does not know is an error naming it.
    pub fn new(model: SafetensorsModel, arch: &str) -> Result<Self, ModelError> {
        let mut names = HashMap::new();
        for hf_name in model.tensor_names() {
            if is_derived_buffer(hf_name) {
                continue;
            }
            let gguf = gguf_name(hf_name).ok_or_else(|| ModelError::UnexpectedTensor {
                name: hf_name.into(),
                arch: arch.into(),
            })?;
            names.insert(gguf, hf_name.to_string());
        }
        Ok(Self {
            model: Arc::new(model),
            names,
        })
    }
}

/// One tensor of a shared checkpoint, found by name on every access (a map lookup).
struct MappedTensor {
    model: Arc<SafetensorsModel>,
    name: String,
}

impl ByteSource for MappedTensor {
    fn bytes(&self) -> &[u8] {
        // The name was looked up successfully when the store handed this tensor out, and the
        // checkpoint is immutable, so the lookup cannot fail; an empty slice would fail the
        // loader's size checks rather than panic.
        self.model.tensor(&self.name).map_or(&[], |view| view.bytes)
    }
}

/// A tensor copied into 8-byte-aligned storage.
struct AlignedCopy {
    words: Vec<u64>,
    len: usize,
}

impl ByteSource for AlignedCopy {
    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
}

fn ggml_type(dtype: Dtype) -> Option<GgmlType> {
    match dtype {
        Dtype::F32 => Some(GgmlType::F32),
        Dtype::F16 => Some(GgmlType::F16),
        Dtype::BF16 => Some(GgmlType::BF16),
        _ => None,
    }
}

impl TensorStore for SafetensorsStore {
    fn tensor(&self, name: &str) -> Result<Option<StoredTensor>, ModelError> {
        let Some(hf_name) = self.names.get(name) else {
            return Ok(None);
        };
        let view = self
            .model
            .tensor(hf_name)
            .map_err(|e| ModelError::InvalidConfig(e.to_string()))?;
        let ty = ggml_type(view.dtype).ok_or_else(|| ModelError::UnsupportedTensorType {
            name: hf_name.clone(),
            ty: view.dtype.name(),
        })?;
        let len = view.bytes.len();
        let source: Arc<dyn ByteSource> =
            if (view.bytes.as_ptr() as usize).is_multiple_of(ty.type_size()) {
                Arc::new(MappedTensor {
                    model: self.model.clone(),
                    name: hf_name.clone(),
                })
            } else {
                crate::limits::check_allocation(
                    || format!("an aligned copy of tensor {hf_name} ({len} bytes)"),
                    Some(len as u64),
                )?;
                let mut words = vec![0u64; len.div_ceil(8)];
                bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..len].copy_from_slice(view.bytes);
                Arc::new(AlignedCopy { words, len })
            };
        Ok(Some(StoredTensor {
            name: name.into(),
            ty,
            dims: view.shape.iter().rev().map(|&d| d as u64).collect(),
            source,
            range: 0..len,
        }))
    }

    fn contains(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    fn names(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::gguf_name;

    #[test]
    fn hugging_face_names_map_to_gguf_names() {
        for (hugging_face, gguf) in [
            (
                "model.layers.3.self_attn.k_proj.weight",
                Some("blk.3.attn_k.weight"),
            ),
            (
                "model.layers.0.self_attn.q_proj.bias",
                Some("blk.0.attn_q.bias"),
            ),
            ("model.embed_tokens.weight", Some("token_embd.weight")),
            ("lm_head.weight", Some("output.weight")),
            ("model.layers.x.mlp.up_proj.weight", None),
            ("vision_tower.patch.weight", None),
        ] {
            assert_eq!(gguf_name(hugging_face).as_deref(), gguf, "{hugging_face}");
        }
    }
}
