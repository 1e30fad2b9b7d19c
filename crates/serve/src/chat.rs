//! The chat template a server renders conversations with: the model's own, or, for a model
//! file without one, the format of its family (Gemma's turns for Gemma models, ChatML
//! otherwise, as llama.cpp does). The choice is logged at start and shown by `/v1/models`.

use rinfer_model::LoadedModel;
use rinfer_model::chat_template::{ChatMessage, ChatTemplate, ChatTemplateError};

/// Gemma's turn format (`<start_of_turn>user ... <end_of_turn>`), as in Gemma 3's own template.
const GEMMA: &str = include_str!("templates/gemma.jinja");
/// ChatML (`<|im_start|>user ... <|im_end|>`).
const CHATML: &str = include_str!("templates/chatml.jinja");

/// How conversations are turned into prompt text.
pub struct ChatFormat {
    /// The built-in template, when the model has none.
    builtin: Option<ChatTemplate>,
    /// `model` when the model file carries the template, else the built-in one's name.
    pub source: &'static str,
}

impl ChatFormat {
    /// The model's template, or the built-in one for its architecture; `bos` and `eos` are the
    /// texts of those tokens.
    pub fn for_model(
        loaded: &LoadedModel,
        bos: &str,
        eos: &str,
    ) -> Result<Self, ChatTemplateError> {
        if loaded.chat_template.is_some() {
            return Ok(Self {
                builtin: None,
                source: "model",
            });
        }
        let (source, text) = if loaded.model.config.arch.starts_with("gemma") {
            ("built-in gemma", GEMMA)
        } else {
            ("built-in chatml", CHATML)
        };
        Ok(Self {
            builtin: Some(ChatTemplate::new(text, bos, eos)?),
            source,
        })
    }

    /// Renders `messages` with the assistant's turn opened.
    pub fn render(
        &self,
        loaded: &LoadedModel,
        messages: &[ChatMessage],
    ) -> Result<String, ChatTemplateError> {
        match self.builtin.as_ref().or(loaded.chat_template.as_ref()) {
            Some(template) => template.render(messages, true),
            None => Ok(String::new()),
        }
    }
}
