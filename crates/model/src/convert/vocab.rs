//! A byte-level BPE `tokenizer.json` as llama.cpp's GGUF tokenizer metadata (`tokenizer.ggml.*`,
//! the `gpt2` tokenizer model), as its converter writes it.

use std::path::Path;

use rinfer_formats::gguf::{MetadataValue, ValueType};
use serde_json::Value;

use crate::error::ModelError;

/// The most tokens a vocabulary may have (4 Mi, far beyond any model's): ids past it are
/// refused before anything is allocated for them.
pub(crate) const MAX_VOCAB: usize = 1 << 22;

/// llama.cpp's token types.
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

fn invalid(path: &Path, what: &str) -> ModelError {
    ModelError::InvalidConfig(format!("{}: {what}", path.display()))
}

fn read_json(path: &Path) -> Result<Value, ModelError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ModelError::InvalidConfig(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| invalid(path, &e.to_string()))
}

fn array(element: ValueType, items: Vec<MetadataValue>) -> MetadataValue {
    MetadataValue::Array { element, items }
}

/// The `tokenizer.ggml.*` entries of the byte-level BPE tokenizer at `path` for a model of at
/// least `vocab_size` tokens whose pre-tokenizer llama.cpp calls `pre`. Ids with no token
/// become `[PAD{id}]` placeholders, as llama.cpp's converter writes them.
///
/// # Errors
/// [`ModelError::InvalidConfig`] for a file that is not JSON or not a byte-level BPE tokenizer
/// (SentencePiece-style byte fallback and other models are not converted).
pub(crate) fn bpe_vocab(
    path: &Path,
    vocab_size: usize,
    pre: &str,
) -> Result<Vec<(String, MetadataValue)>, ModelError> {
    let json = read_json(path)?;
    let model = &json["model"];
    if model["type"].as_str() != Some("BPE") || model["byte_fallback"].as_bool() == Some(true) {
        return Err(invalid(
            path,
            "only byte-level BPE tokenizers (Llama 3, Qwen) can be converted; this one is not",
        ));
    }
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| invalid(path, "model.vocab is not an object"))?;
    let added = json["added_tokens"].as_array().cloned().unwrap_or_default();
    let id_of = |v: &Value| v.as_u64().and_then(|id| usize::try_from(id).ok());
    let max_id = vocab
        .values()
        .chain(added.iter().map(|t| &t["id"]))
        .filter_map(id_of)
        .max()
        .map_or(0, |m| m + 1);
    let n = vocab_size.max(max_id);
    if n > MAX_VOCAB {
        return Err(invalid(
            path,
            &format!(
                "a token id of {} is past the {MAX_VOCAB} tokens a vocabulary may have",
                n - 1
            ),
        ));
    }
    let mut tokens: Vec<Option<String>> = vec![None; n];
    let mut types = vec![NORMAL; n];
    for (token, id) in vocab {
        let id = id_of(id).ok_or_else(|| invalid(path, "a vocabulary id is not a number"))?;
        tokens[id] = Some(token.clone());
    }
    for t in &added {
        let (Some(id), Some(content)) = (id_of(&t["id"]), t["content"].as_str()) else {
            return Err(invalid(path, "an added token has no id or content"));
        };
        tokens[id] = Some(content.to_string());
        types[id] = if t["special"].as_bool() == Some(true) {
            CONTROL
        } else {
            USER_DEFINED
        };
    }
    let tokens: Vec<MetadataValue> = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            MetadataValue::String(t.unwrap_or_else(|| {
                types[id] = UNUSED;
                format!("[PAD{id}]")
            }))
        })
        .collect();
    let merges = model["merges"]
        .as_array()
        .ok_or_else(|| invalid(path, "model.merges is not a list"))?
        .iter()
        .map(|m| match m {
            Value::String(s) => Some(s.clone()),
            Value::Array(pair) => match (pair.first(), pair.get(1)) {
                (Some(Value::String(a)), Some(Value::String(b))) => Some(format!("{a} {b}")),
                _ => None,
            },
            _ => None,
        })
        .map(|m| m.map(MetadataValue::String))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| invalid(path, "a merge is neither \"a b\" nor [a, b]"))?;
    Ok(vec![
        (
            "tokenizer.ggml.model".into(),
            MetadataValue::String("gpt2".into()),
        ),
        (
            "tokenizer.ggml.pre".into(),
            MetadataValue::String(pre.into()),
        ),
        (
            "tokenizer.ggml.tokens".into(),
            array(ValueType::String, tokens),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            array(
                ValueType::I32,
                types.into_iter().map(MetadataValue::I32).collect(),
            ),
        ),
        (
            "tokenizer.ggml.merges".into(),
            array(ValueType::String, merges),
        ),
    ])
}

/// The entries `tokenizer_config.json` at `path` adds: whether BOS/EOS are added and the chat
/// template.
pub(crate) fn tokenizer_config(path: &Path) -> Result<Vec<(String, MetadataValue)>, ModelError> {
    let json = read_json(path)?;
    let mut out = Vec::new();
    for (key, gguf) in [
        ("add_bos_token", "tokenizer.ggml.add_bos_token"),
        ("add_eos_token", "tokenizer.ggml.add_eos_token"),
    ] {
        if let Some(flag) = json[key].as_bool() {
            out.push((gguf.into(), MetadataValue::Bool(flag)));
        }
    }
    if let Some(template) = json["chat_template"].as_str() {
        out.push((
            "tokenizer.chat_template".into(),
            MetadataValue::String(template.into()),
        ));
    }
    Ok(out)
}
