//! Hugging Face model directories: `config.json` and the tokenizer, generation and weight files
//! beside it.
//!
//! [`HfConfig`] types the fields that most decoder-only architectures share and keeps every
//! other field, untouched, in [`HfConfig::extra`]. It does not fill in defaults: a field the file
//! lacks stays `None`, and deciding what that means is the architecture's job.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::safetensors::{SafetensorsError, SafetensorsModel, WeightFiles};

/// The file name of a model's configuration.
pub const CONFIG_FILE: &str = "config.json";

/// Why a Hugging Face model directory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HfError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The directory has no `config.json`.
    #[error("{dir}: no config.json here; is this a Hugging Face model directory?")]
    MissingConfig {
        /// The directory searched.
        dir: PathBuf,
    },
    /// `config.json` is not JSON, or a typed field holds a value of the wrong kind.
    #[error("{path}: invalid model config: {source}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// The JSON error, with line and column.
        source: serde_json::Error,
    },
    /// The weights could not be found or opened.
    #[error(transparent)]
    Weights(#[from] SafetensorsError),
}

/// One or several token ids: `eos_token_id` is a number in most configs and a list in some
/// (Llama 3 instruct lists every end-of-turn token).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum TokenIds {
    /// A single id.
    One(u32),
    /// Several ids.
    Many(Vec<u32>),
}

impl TokenIds {
    /// The ids as a slice.
    pub fn as_slice(&self) -> &[u32] {
        match self {
            TokenIds::One(id) => std::slice::from_ref(id),
            TokenIds::Many(ids) => ids,
        }
    }
}

/// A Hugging Face `config.json`: the common fields typed, the rest in [`Self::extra`].
///
/// Every typed field is `None` when the file lacks it or holds `null`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct HfConfig {
    /// Model classes, e.g. `["LlamaForCausalLM"]`.
    pub architectures: Option<Vec<String>>,
    /// The architecture family, e.g. `"llama"`, `"qwen2"`, `"gemma3_text"`.
    pub model_type: Option<String>,
    /// Width of the residual stream (`n_embd`).
    pub hidden_size: Option<usize>,
    /// Width of the feed-forward hidden layer (`n_ff`).
    pub intermediate_size: Option<usize>,
    /// Number of decoder blocks.
    pub num_hidden_layers: Option<usize>,
    /// Query heads per layer.
    pub num_attention_heads: Option<usize>,
    /// Key/value heads per layer (grouped-query attention); absent means as many as query heads
    /// in most architectures.
    pub num_key_value_heads: Option<usize>,
    /// Dimension of one attention head, when it is not `hidden_size / num_attention_heads`.
    pub head_dim: Option<usize>,
    /// Epsilon of RMSNorm.
    pub rms_norm_eps: Option<f64>,
    /// Epsilon of LayerNorm (Phi, most encoder-style configs).
    pub layer_norm_eps: Option<f64>,
    /// Epsilon of LayerNorm as GPT-2 spells it.
    pub layer_norm_epsilon: Option<f64>,
    /// RoPE base frequency.
    pub rope_theta: Option<f64>,
    /// RoPE scaling (`{"rope_type": "llama3", "factor": 8.0, …}`), kept as JSON because its
    /// fields depend on `rope_type`.
    pub rope_scaling: Option<Value>,
    /// RoPE settings as transformers 5 writes them (replacing `rope_theta` and `rope_scaling`).
    pub rope_parameters: Option<Value>,
    /// Fraction of each head's dimensions that RoPE rotates (Phi).
    pub partial_rotary_factor: Option<f64>,
    /// Longest context the model was trained for.
    pub max_position_embeddings: Option<usize>,
    /// Rows of the token embedding.
    pub vocab_size: Option<usize>,
    /// Whether the output projection reuses the token embedding.
    pub tie_word_embeddings: Option<bool>,
    /// Beginning-of-sequence token.
    pub bos_token_id: Option<TokenIds>,
    /// End-of-sequence token or tokens.
    pub eos_token_id: Option<TokenIds>,
    /// The type the weights were saved in (`"bfloat16"`, `"float32"` …), as transformers 4
    /// writes it.
    pub torch_dtype: Option<String>,
    /// The same as `torch_dtype`, as transformers 5 writes it.
    pub dtype: Option<String>,
    /// Sliding-window attention span in tokens.
    pub sliding_window: Option<usize>,
    /// Feed-forward activation (`"silu"`, `"gelu_new"`, `"gelu_pytorch_tanh"` …).
    pub hidden_act: Option<String>,
    /// Feed-forward activation as Gemma spells it.
    pub hidden_activation: Option<String>,
    /// Whether the attention projections have biases.
    pub attention_bias: Option<bool>,
    /// Whether the feed-forward projections have biases.
    pub mlp_bias: Option<bool>,
    /// Every field not typed above, in file order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl HfConfig {
    /// Parses the text of a `config.json`.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Reads and parses a `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, HfError> {
        let text = std::fs::read(path).map_err(|source| HfError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|source| HfError::Config {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The files of a Hugging Face model directory, with its config parsed.
///
/// Only `config.json` and the safetensors weights are required; the other files are recorded
/// when present and read by whoever needs them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HfModelDir {
    /// The directory.
    pub dir: PathBuf,
    /// The parsed `config.json`.
    pub config: HfConfig,
    /// `tokenizer.json` (a `tokenizers` tokenizer), if present.
    pub tokenizer: Option<PathBuf>,
    /// `tokenizer_config.json` (special tokens, chat template), if present.
    pub tokenizer_config: Option<PathBuf>,
    /// `generation_config.json` (default sampling settings, end tokens), if present.
    pub generation_config: Option<PathBuf>,
    /// The safetensors weights, single file or sharded.
    pub weights: WeightFiles,
}

impl HfModelDir {
    /// Finds and checks the files of the model in `dir`, parsing `config.json`. The weights are
    /// located but not opened: see [`Self::open_weights`].
    pub fn discover(dir: &Path) -> Result<Self, HfError> {
        let config_path = dir.join(CONFIG_FILE);
        if !config_path.is_file() {
            return Err(HfError::MissingConfig {
                dir: dir.to_path_buf(),
            });
        }
        let config = HfConfig::from_file(&config_path)?;
        let optional = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
        Ok(HfModelDir {
            dir: dir.to_path_buf(),
            config,
            tokenizer: optional("tokenizer.json"),
            tokenizer_config: optional("tokenizer_config.json"),
            generation_config: optional("generation_config.json"),
            weights: WeightFiles::find(dir)?,
        })
    }

    /// The path of `config.json`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }

    /// Memory-maps and validates the weights.
    pub fn open_weights(&self) -> Result<SafetensorsModel, SafetensorsError> {
        SafetensorsModel::open_files(&self.weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eos_token_id_may_be_a_number_or_a_list() {
        let one = HfConfig::from_json(r#"{"eos_token_id": 2}"#).unwrap();
        assert_eq!(one.eos_token_id.unwrap().as_slice(), &[2]);
        let many = HfConfig::from_json(r#"{"eos_token_id": [128001, 128009]}"#).unwrap();
        assert_eq!(many.eos_token_id.unwrap().as_slice(), &[128001, 128009]);
        let null = HfConfig::from_json(r#"{"eos_token_id": null, "head_dim": null}"#).unwrap();
        assert_eq!((null.eos_token_id, null.head_dim), (None, None));
    }

    #[test]
    fn unknown_fields_are_kept_in_file_order() {
        let config = HfConfig::from_json(
            r#"{"zeta": 1, "hidden_size": 64, "alpha": {"nested": [1, 2]}, "rope_theta": 10000}"#,
        )
        .unwrap();
        assert_eq!(config.hidden_size, Some(64));
        assert_eq!(config.rope_theta, Some(10000.0));
        let keys: Vec<_> = config.extra.keys().map(String::as_str).collect();
        assert_eq!(keys, ["zeta", "alpha"]);
    }

    #[test]
    fn a_typed_field_of_the_wrong_kind_is_an_error_naming_it() {
        let err = HfConfig::from_json(r#"{"hidden_size": "large"}"#).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
