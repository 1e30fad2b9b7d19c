//! Opening a model file into a [`Model`], or everything a program needs to generate text.

use std::path::Path;
use std::sync::Arc;

use rinfer_formats::gguf::GgufFile;

use crate::arch::config_from_metadata;
use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::forward::Model;
use crate::load_gguf;
use crate::tokenizer::Tokenizer;

impl Model {
    /// Opens the GGUF model at `path`: reads its configuration and maps its weights.
    pub fn open_gguf(path: impl AsRef<Path>) -> Result<(Self, Arc<GgufFile>), ModelError> {
        let file = Arc::new(GgufFile::open(path)?);
        let model = Self::from_gguf(&file)?;
        Ok((model, file))
    }

    /// Builds a model over an opened GGUF file (the weights borrow its memory map).
    pub fn from_gguf(file: &Arc<GgufFile>) -> Result<Self, ModelError> {
        let vocab = load_gguf::vocab_rows(file)?;
        let config = config_from_metadata(file.metadata(), vocab)?;
        let weights = load_gguf::load(file, &config)?;
        Ok(Self { config, weights })
    }
}

/// A model with its tokenizer and chat template, as one GGUF file holds them.
///
/// ```no_run
/// use rinfer_model::{GenerateRequest, KvCache, LoadedModel, SamplingParams, Scratch, generate};
///
/// let loaded = LoadedModel::open("gemma-3-270m-q4_k_m.gguf")?;
/// let prompt = loaded.tokenizer.encode("The capital of France is", true, false);
/// let request = GenerateRequest {
///     prompt,
///     max_tokens: 16,
///     sampling: SamplingParams::greedy(),
///     stop: vec![],
/// };
/// let mut cache = KvCache::new(&loaded.model.config, 256, 64);
/// let mut scratch = Scratch::new(&loaded.model.config, 64);
/// let out = generate(&loaded.model, &loaded.tokenizer, &request, &mut cache, &mut scratch, |text| {
///     print!("{text}")
/// })?;
/// println!("\n{} tokens", out.tokens.len());
/// # Ok::<(), rinfer_model::ModelError>(())
/// ```
pub struct LoadedModel {
    /// The transformer.
    pub model: Model,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// Its chat template, if the file has one.
    pub chat_template: Option<ChatTemplate>,
    /// The mapped file the weights borrow from.
    pub file: Arc<GgufFile>,
}

impl LoadedModel {
    /// Opens a GGUF model with its tokenizer and chat template.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        let (model, file) = Model::open_gguf(path)?;
        let tokenizer = Tokenizer::from_gguf(file.metadata())?;
        let chat_template = ChatTemplate::from_metadata(file.metadata())
            .map_err(|e| ModelError::InvalidConfig(format!("chat template: {e}")))?;
        Ok(Self {
            model,
            tokenizer,
            chat_template,
            file,
        })
    }
}
