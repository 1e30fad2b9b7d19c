//! Opening a model file into a [`Model`], or everything a program needs to generate text.

use std::path::Path;
use std::sync::Arc;

use rinfer_formats::HfModelDir;
use rinfer_formats::gguf::{GgufFile, open_shards};

use crate::arch::config_from_metadata;
use crate::chat_template::{ChatTemplate, ChatTemplateError};
use crate::error::ModelError;
use crate::forward::Model;
use crate::hf_checkpoint::{config_from_hf, gguf_arch};
use crate::limits::fit_context_to_positions;
use crate::load;
use crate::tensor_store::{GgufStore, SafetensorsStore};
use crate::tokenizer::Tokenizer;

impl Model {
    /// Opens the GGUF model at `path`: reads its configuration and maps its weights. `path` may
    /// be any shard of a split model; the file returned is then its first shard, which holds the
    /// model's metadata.
    pub fn open_gguf(path: impl AsRef<Path>) -> Result<(Self, Arc<GgufFile>), ModelError> {
        let shards: Vec<Arc<GgufFile>> = open_shards(path)?.into_iter().map(Arc::new).collect();
        let model = Self::from_gguf_shards(&shards)?;
        Ok((model, shards[0].clone()))
    }

    /// Builds a model over an opened GGUF file (the weights borrow its memory map).
    pub fn from_gguf(file: &Arc<GgufFile>) -> Result<Self, ModelError> {
        Self::from_gguf_shards(std::slice::from_ref(file))
    }

    /// Builds a model over every shard of a split GGUF model, first shard first, as
    /// [`open_shards`] returns them (the configuration is the first shard's metadata; the
    /// weights borrow each shard's memory map).
    pub fn from_gguf_shards(shards: &[Arc<GgufFile>]) -> Result<Self, ModelError> {
        let first = shards.first().ok_or_else(|| {
            ModelError::InvalidConfig("a GGUF model needs at least one file".into())
        })?;
        let store = GgufStore::new(shards);
        let vocab = load::vocab_rows(&store)?;
        let mut config = config_from_metadata(first.metadata(), vocab)?;
        let weights = load::load(&store, &config)?;
        fit_context_to_positions(&mut config, &weights)?;
        Ok(Self::new(config, weights))
    }

    /// Opens a Hugging Face model directory (`config.json` and safetensors weights in F32,
    /// F16 or BF16; llama, mistral, qwen2 and qwen3). The weights stay memory-mapped.
    pub fn open_safetensors(dir: impl AsRef<Path>) -> Result<Self, ModelError> {
        let hf = HfModelDir::discover(dir.as_ref()).map_err(hf_error)?;
        Self::from_hf_dir(&hf)
    }

    fn from_hf_dir(hf: &HfModelDir) -> Result<Self, ModelError> {
        let arch = gguf_arch(&hf.config)?;
        let weights = hf.open_weights().map_err(hf_error)?;
        let store = SafetensorsStore::new(weights, arch)?;
        let vocab = load::vocab_rows(&store)?;
        let mut config = config_from_hf(&hf.config, vocab)?;
        let weights = load::load(&store, &config)?;
        fit_context_to_positions(&mut config, &weights)?;
        Ok(Self::new(config, weights))
    }
}

fn hf_error(e: impl std::fmt::Display) -> ModelError {
    ModelError::InvalidConfig(e.to_string())
}

/// A model with its tokenizer and chat template: one GGUF file, or a Hugging Face directory.
///
/// ```no_run
/// use rinfer_model::{DeviceRequest, Engine, EngineSettings, LoadedModel, Request, SamplingParams};
///
/// let loaded = LoadedModel::open("gemma-3-270m-q4_k_m.gguf")?;
/// let prompt = loaded.tokenizer.encode("The capital of France is", true, false)?;
/// let mut engine = Engine::new(&loaded, EngineSettings::single(256), DeviceRequest::Cpu)?;
/// let request = Request::new(prompt, 16).with_sampling(SamplingParams::greedy());
/// let out = engine.generate(request, |text| print!("{text}"))?;
/// println!("\n{} tokens", out.tokens.len());
/// # Ok::<(), rinfer_model::ModelError>(())
/// ```
pub struct LoadedModel {
    /// The transformer.
    pub model: Model,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// Its own chat template, if the file has one that parses (choose the template to chat
    /// with through [`crate::chat_template::resolve`], which also knows the built-in formats).
    pub chat_template: Option<Arc<ChatTemplate>>,
    /// Why the file's chat template cannot be used (it does not parse), when it has one. Loading
    /// goes on without it: commands that do not chat never need it.
    pub chat_template_error: Option<ChatTemplateError>,
}

/// A model's own template, or why it is unusable; `(None, None)` when it has none.
fn own_template(
    found: Result<Option<ChatTemplate>, ChatTemplateError>,
) -> (Option<Arc<ChatTemplate>>, Option<ChatTemplateError>) {
    match found {
        Ok(template) => (template.map(Arc::new), None),
        Err(e) => (None, Some(e)),
    }
}

/// The per-token metadata arrays the tokenizer copies.
const VOCABULARY_KEYS: [&str; 4] = [
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
];

impl LoadedModel {
    /// Opens a GGUF model file (any shard of a split model), or a Hugging Face model directory
    /// (`config.json`, `tokenizer.json` and safetensors weights), with its tokenizer and chat
    /// template.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        let path = path.as_ref();
        if path.is_dir() {
            return Self::open_hf_dir(path);
        }
        let mut shards = open_shards(path)?;
        let file = &mut shards[0];
        let tokenizer = Tokenizer::from_gguf(file.metadata())?;
        let (chat_template, chat_template_error) =
            own_template(ChatTemplate::from_metadata(file.metadata()));
        // The tokenizer now holds the vocabulary: drop the metadata's copy of it, the largest
        // values in the file (tens of megabytes for a 262 144-token vocabulary).
        for key in VOCABULARY_KEYS {
            file.metadata_mut().remove(key);
        }
        let shards: Vec<Arc<GgufFile>> = shards.into_iter().map(Arc::new).collect();
        let model = Model::from_gguf_shards(&shards)?;
        Ok(Self {
            model,
            tokenizer,
            chat_template,
            chat_template_error,
        })
    }

    fn open_hf_dir(dir: &Path) -> Result<Self, ModelError> {
        let hf = HfModelDir::discover(dir).map_err(hf_error)?;
        let model = Model::from_hf_dir(&hf)?;
        let tokenizer_path = hf.tokenizer.as_ref().ok_or_else(|| {
            ModelError::InvalidConfig(format!("{} has no tokenizer.json", dir.display()))
        })?;
        let tokenizer = Tokenizer::from_hf_json(tokenizer_path)?;
        let (chat_template, chat_template_error) = match &hf.tokenizer_config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ModelError::InvalidConfig(format!("cannot read {}: {e}", path.display()))
                })?;
                own_template(ChatTemplate::from_tokenizer_config(&text))
            }
            None => (None, None),
        };
        Ok(Self {
            model,
            tokenizer,
            chat_template,
            chat_template_error,
        })
    }
}
