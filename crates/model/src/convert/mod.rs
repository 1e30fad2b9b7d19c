//! `rinfer convert`: a Hugging Face checkpoint (the safetensors architectures rinfer reads) as
//! an F32, F16 or BF16 GGUF file with llama.cpp's tensor names, metadata keys and tokenizer
//! metadata, so that rinfer, `rinfer quantize` and llama.cpp load it.
//!
//! As llama.cpp's converter does, the q/k projections of llama-family models are permuted so
//! that RoPE rotates adjacent pairs (GGUF's llama layout), and 1-D tensors stay F32.

mod vocab;

use std::io::Write;
use std::path::Path;

use rinfer_formats::gguf::{GgufStreamWriter, Metadata, MetadataValue, TensorHeader};
use rinfer_formats::{GgmlType, HfModelDir};

use rinfer_transformer::{Role, TensorName};

use crate::error::ModelError;
use crate::hf_checkpoint::{gguf_arch, metadata_from_hf};
use crate::quantize::{FileType, llama_order};
use crate::tensor_store::{SafetensorsStore, TensorStore};

/// How far [`convert_hf_dir`] got: called after each tensor with (done, total, name).
pub type ConvertProgress<'a> = &'a mut dyn FnMut(usize, usize, &str);

fn invalid(e: impl std::fmt::Display) -> ModelError {
    ModelError::InvalidConfig(e.to_string())
}

/// llama.cpp's name for a checkpoint's pre-tokenizer, by GGUF architecture.
fn pre_tokenizer(arch: &str) -> &'static str {
    match arch {
        "qwen2" | "qwen3" => "qwen2",
        _ => "llama-bpe",
    }
}

/// The `general.file_type` of a file whose weights are `ty`.
fn file_type_id(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::F16 => FileType::F16,
        GgmlType::BF16 => FileType::Bf16,
        _ => FileType::F32,
    }
    .id()
}

/// Reorders the rows of a q or k projection (`rows` rows of `row_len` values, `heads` heads)
/// from Hugging Face's rotate-half layout to GGUF's adjacent pairs: within each head, row
/// `2i + j` comes from row `j * head_dim / 2 + i`.
fn permute_rope_rows(x: &[f32], row_len: usize, heads: usize) -> Result<Vec<f32>, ModelError> {
    let rows = x.len() / row_len.max(1);
    if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
        return Err(invalid(format!(
            "a q/k projection of {rows} rows does not split into {heads} heads of pairs"
        )));
    }
    let (head_dim, half) = (rows / heads, rows / heads / 2);
    let mut out = vec![0.0f32; x.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let to = (h * head_dim + 2 * i + j) * row_len;
                let from = (h * head_dim + j * half + i) * row_len;
                out[to..to + row_len].copy_from_slice(&x[from..from + row_len]);
            }
        }
    }
    Ok(out)
}

/// Converts the Hugging Face model directory `dir` into a GGUF file whose 2-D weights are
/// `weight_type` (F32, F16 or BF16), written to `out` one tensor at a time, calling `progress`
/// after each tensor; gives `out` back.
///
/// # Errors
/// [`ModelError::UnknownArchitecture`] for a model type rinfer does not read,
/// [`ModelError::InvalidConfig`] for a missing or unusable `config.json`, `tokenizer.json` or
/// weight, [`ModelError::UnexpectedTensor`] for a tensor rinfer does not know.
pub fn convert_hf_dir<W: Write>(
    dir: &Path,
    weight_type: GgmlType,
    out: W,
    progress: ConvertProgress<'_>,
) -> Result<W, ModelError> {
    if !matches!(weight_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        return Err(invalid(format!(
            "convert writes F32, F16 or BF16 weights, not {weight_type}; quantize the result with `rinfer quantize`"
        )));
    }
    let hf = HfModelDir::discover(dir).map_err(invalid)?;
    let arch = gguf_arch(&hf.config)?;
    let store = SafetensorsStore::new(hf.open_weights().map_err(invalid)?, arch)?;
    let embd = store
        .tensor(&TensorName::model(Role::TokenEmbd).to_string())?
        .ok_or_else(|| ModelError::MissingTensor {
            name: TensorName::model(Role::TokenEmbd).to_string(),
        })?;
    // Shapes are checked against what they need before anything is allocated: a file may
    // claim sizes far beyond its real bytes (a sparse file).
    for name in store.names() {
        let Some(t) = store.tensor(&name)? else {
            continue;
        };
        if t.dims.contains(&0) {
            return Err(invalid(format!(
                "tensor {name} of shape {:?} has no elements; the checkpoint is damaged",
                t.dims
            )));
        }
        let ty = if t.dims.len() < 2 {
            GgmlType::F32
        } else {
            weight_type
        };
        // The f32 values (twice, when permuted) and the converted bytes.
        let per_element = 8 + ty.type_size() as u64;
        crate::limits::check_allocation(
            || format!("converting tensor {name} ({:?})", t.dims),
            t.dims
                .iter()
                .try_fold(per_element, |n, &d| n.checked_mul(d)),
        )?;
    }
    let vocab_rows = embd.dims.get(1).copied().unwrap_or(0);
    if vocab_rows > vocab::MAX_VOCAB as u64 {
        return Err(invalid(format!(
            "the token embedding has {vocab_rows} rows, more than the {} tokens a vocabulary \
             may have",
            vocab::MAX_VOCAB
        )));
    }
    let vocab_rows = vocab_rows as usize;

    let mut metadata = Metadata::default();
    let mut put = |key: &str, value: MetadataValue| metadata.insert(key, value).map_err(invalid);
    let meta = metadata_from_hf(&hf.config)?;
    for (key, value) in meta.iter() {
        put(key, value.clone())?;
        if key == "general.architecture" {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            put(
                "general.name",
                MetadataValue::String(name.unwrap_or_default()),
            )?;
            put(
                "general.file_type",
                MetadataValue::U32(file_type_id(weight_type)),
            )?;
        }
    }
    let (heads, kv_heads) = (
        hf.config.num_attention_heads.unwrap_or(0),
        hf.config
            .num_key_value_heads
            .or(hf.config.num_attention_heads)
            .unwrap_or(0),
    );
    let head_dim = hf
        .config
        .head_dim
        .or_else(|| {
            hf.config
                .hidden_size
                .zip(Some(heads))
                .and_then(|(h, n)| h.checked_div(n))
        })
        .unwrap_or(0);
    put(
        &format!("{arch}.rope.dimension_count"),
        MetadataValue::U32(head_dim as u32),
    )?;
    put(
        &format!("{arch}.vocab_size"),
        MetadataValue::U32(vocab_rows as u32),
    )?;
    let tokenizer = hf
        .tokenizer
        .as_ref()
        .ok_or_else(|| invalid(format!("{} has no tokenizer.json", dir.display())))?;
    for (key, value) in vocab::bpe_vocab(tokenizer, vocab_rows, pre_tokenizer(arch))? {
        put(&key, value)?;
    }
    for (key, ids) in [
        ("tokenizer.ggml.bos_token_id", &hf.config.bos_token_id),
        ("tokenizer.ggml.eos_token_id", &hf.config.eos_token_id),
    ] {
        if let Some(&id) = ids.as_ref().and_then(|ids| ids.as_slice().first()) {
            put(key, MetadataValue::U32(id))?;
        }
    }
    if let Some(path) = &hf.tokenizer_config {
        for (key, value) in vocab::tokenizer_config(path)? {
            put(&key, value)?;
        }
    }

    let mut names = store.names();
    names.sort_by(|a, b| llama_order(a, b));
    let mut headers = Vec::with_capacity(names.len());
    for name in &names {
        let t = store
            .tensor(name)?
            .ok_or_else(|| ModelError::MissingTensor { name: name.clone() })?;
        let ty = if t.dims.len() < 2 {
            GgmlType::F32
        } else {
            weight_type
        };
        headers.push(TensorHeader {
            name: name.clone(),
            ty,
            dims: t.dims,
        });
    }
    let mut stream = GgufStreamWriter::new(out, &metadata, &headers).map_err(invalid)?;
    let permute = arch == "llama";
    for (done, header) in headers.iter().enumerate() {
        let name = &header.name;
        let t = store
            .tensor(name)?
            .ok_or_else(|| ModelError::MissingTensor { name: name.clone() })?;
        let row_len = t.dims.first().copied().unwrap_or(1) as usize;
        let mut values = vec![0.0f32; t.dims.iter().product::<u64>() as usize];
        rinfer_kernels::dequantize_row(t.ty, t.bytes(), &mut values).map_err(invalid)?;
        let rope_heads = match TensorName::parse(name).map(|t| t.role) {
            Some(Role::AttnQ) => Some(heads),
            Some(Role::AttnK) => Some(kv_heads),
            _ => None,
        };
        if let (true, Some(h)) = (permute, rope_heads) {
            let len = if t.dims.len() == 1 { 1 } else { row_len };
            values = permute_rope_rows(&values, len, h)?;
        }
        let mut data = vec![0u8; values.len() * header.ty.type_size()];
        rinfer_kernels::quantize_rows(header.ty, &values, row_len, &mut data).map_err(invalid)?;
        stream.write_tensor(&data).map_err(invalid)?;
        progress(done + 1, names.len(), name);
    }
    stream.finish().map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_rows_move_from_halves_to_adjacent_pairs() {
        // One head of four rows (head_dim 4): rows 0, 1 | 2, 3 become 0, 2, 1, 3.
        let x = [0.0, 1.0, 2.0, 3.0];
        assert_eq!(permute_rope_rows(&x, 1, 1).unwrap(), [0.0, 2.0, 1.0, 3.0]);
        // Two heads of two rows each stay as they are.
        assert_eq!(permute_rope_rows(&x, 1, 2).unwrap(), [0.0, 1.0, 2.0, 3.0]);
        assert!(permute_rope_rows(&x, 1, 3).is_err());
    }
}
