//! The chat template a server renders conversations with, chosen as every front end chooses it
//! ([`rinfer_model::chat_template::resolve`]): `--chat-template`, else the model's own, else the
//! built-in format of its family. The choice is logged at start and shown by `/v1/models`.

use rinfer_model::LoadedModel;
use rinfer_model::chat_template::{
    ChatMessage, ChatTemplate, ChatTemplateError, RenderProcess, ResolvedChatTemplate, resolve,
};
use serde_json::Value;

/// How conversations are turned into prompt tokens.
pub struct ChatFormat {
    /// The template, or why there is none (chat requests then fail with it; completions work).
    chosen: Result<ResolvedChatTemplate, String>,
}

impl ChatFormat {
    /// The template for `loaded`: `choice` (`--chat-template FILE|NAME`), else the model's own,
    /// else its family's built-in format, rendered in processes that `process` starts when
    /// given. A warning about the choice is logged once.
    ///
    /// # Errors
    ///
    /// Only when `choice` is given and cannot be used; a model with no usable template still
    /// serves completions, and its chat requests get the resolver's error.
    pub fn for_model(
        loaded: &LoadedModel,
        choice: Option<&str>,
        process: Option<&RenderProcess>,
    ) -> Result<Self, ChatTemplateError> {
        match resolve(choice, loaded) {
            Ok(mut resolved) => {
                if let Some(process) = process {
                    resolved = resolved.in_processes(process.clone());
                }
                if let Some(warning) = &resolved.warning {
                    tracing::warn!("{warning}");
                }
                Ok(Self {
                    chosen: Ok(resolved),
                })
            }
            Err(e) if choice.is_some() => Err(e),
            Err(e) => {
                tracing::warn!("{e}; /v1/chat/completions will refuse requests");
                Ok(Self {
                    chosen: Err(e.to_string()),
                })
            }
        }
    }

    /// Where the template came from: `model`, `built-in gemma`, `file PATH`, or `none`.
    pub fn source(&self) -> String {
        match &self.chosen {
            Ok(resolved) => resolved.origin.to_string(),
            Err(_) => "none".into(),
        }
    }

    /// Renders `messages` with the assistant's turn opened, to token ids: the template's markup
    /// as control tokens, the messages' text as text.
    /// `tools` (when given) are passed to the template as Hugging Face's `apply_chat_template`
    /// passes them.
    /// `vars` are further template variables (`chat_template_kwargs`, `reasoning_effort`).
    pub fn render_tokens_with_vars(
        &self,
        loaded: &LoadedModel,
        messages: &[ChatMessage],
        tools: Option<&Value>,
        vars: &serde_json::Map<String, Value>,
    ) -> Result<Vec<u32>, ChatError> {
        let resolved = self
            .chosen
            .as_ref()
            .map_err(|e| ChatError::NoTemplate(e.clone()))?;
        resolved
            .template
            .render_tokens_with_vars(messages, tools, vars, true, &loaded.tokenizer, None)
            .map_err(ChatError::Template)
    }

    /// The template in use, if any.
    pub fn template(&self) -> Option<&ChatTemplate> {
        self.chosen.as_ref().ok().map(|r| r.template.as_ref())
    }
}

/// Why a conversation could not become a prompt.
#[derive(Debug)]
pub enum ChatError {
    /// The server has no chat template (the message names `--chat-template`).
    NoTemplate(String),
    /// The template failed on this conversation.
    Template(ChatTemplateError),
}
