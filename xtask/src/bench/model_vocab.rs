//! What the serve benchmarks need to know of a model's vocabulary: its end-of-generation tokens
//! (found as llama.cpp finds them: `tokenizer.ggml.eos_token_id`, `eot_token_id`,
//! `eom_token_id` and the end-of-turn texts such as `<end_of_turn>`), which the benchmarks ban
//! so that every reply has its full length, and whether the file carries a chat template.

use std::path::Path;

use anyhow::{Context, Result};
use rinfer_formats::gguf::GgufFile;
use rinfer_text::Tokenizer;
use serde_json::{Map, Value, json};

/// The chat template's metadata key.
const CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// A model's end-of-generation tokens and whether it has a chat template.
#[derive(Debug, PartialEq)]
pub struct ModelVocab {
    /// The end-of-generation ids, ascending.
    pub end_of_generation: Vec<u32>,
    /// Whether the file has `tokenizer.chat_template`.
    pub chat_template: bool,
}

impl ModelVocab {
    /// Reads `model`'s vocabulary.
    pub fn read(model: &Path) -> Result<Self> {
        let file = GgufFile::open(model).with_context(|| format!("reading {}", model.display()))?;
        let meta = file.metadata();
        let tokenizer = Tokenizer::from_gguf(meta)
            .with_context(|| format!("the vocabulary of {}", model.display()))?;
        let mut end_of_generation = tokenizer.eog_ids().to_vec();
        end_of_generation.sort_unstable();
        Ok(Self {
            end_of_generation,
            chat_template: meta.get(CHAT_TEMPLATE).is_some(),
        })
    }

    /// A `logit_bias` object that makes every end-of-generation token all but impossible.
    pub fn ban_end_of_generation(&self) -> Value {
        let bias: Map<String, Value> = self
            .end_of_generation
            .iter()
            .map(|id| (id.to_string(), json!(-100)))
            .collect();
        Value::Object(bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/models")
            .join(name)
    }

    #[test]
    fn a_templated_model_bans_its_end_of_turn_token_beside_its_end_of_sequence() {
        let vocab = ModelVocab::read(&fixture("gemma3-tiny-q4_k_m.gguf")).unwrap();
        assert!(vocab.end_of_generation.len() >= 2, "{vocab:?}");
        let bias = vocab.ban_end_of_generation();
        assert_eq!(
            bias.as_object().unwrap().len(),
            vocab.end_of_generation.len()
        );
    }
}
