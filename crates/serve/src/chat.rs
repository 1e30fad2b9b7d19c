//! The chat template a server renders conversations with, chosen as every front end chooses it
//! ([`rinfer_model::chat_template::resolve`]): `--chat-template`, else the model's own, else the
//! built-in format of its family. The choice is logged at start and shown by `/v1/models`
//! (a template file by its name only: the server's paths are not the clients' business).
//!
//! A template is code from a model file. Its output is capped at what the context could ever
//! hold ([`max_prompt_bytes`]), so a template that writes without end is stopped long before
//! its text reaches the tokenizer; and a request gives its compute slot back while its
//! conversation renders (the render waits on a child process or a worker thread), so renders
//! that run to their deadline do not hold up other requests.

use std::sync::Arc;

use rinfer_model::chat_template::{
    ChatMessage, ChatTemplate, ChatTemplateError, RenderLimits, RenderProcess,
    ResolvedChatTemplate, TemplateOrigin, resolve,
};
use rinfer_model::{LoadedModel, Tokenizer};
use serde_json::Value;

use crate::blocking::CancelFlag;

/// The most bytes a rendered prompt of a `context`-token model may have: no token covers more
/// bytes than the vocabulary's longest (its text or its bytes), so a longer prompt cannot fit
/// the context; twice that, for normalizers that drop text, and never more than the render
/// limits' own cap.
pub fn max_prompt_bytes(tokenizer: &Tokenizer, context: usize) -> usize {
    let longest = (0..tokenizer.vocab_size() as u32)
        .map(|id| {
            let text = tokenizer.token_text(id).map_or(0, str::len);
            let piece = tokenizer.token_piece(id).map_or(0, |p| p.len());
            text.max(piece)
        })
        .max()
        .unwrap_or(1)
        .max(1);
    context
        .saturating_mul(longest)
        .saturating_mul(2)
        .saturating_add(4 << 10)
        .min(RenderLimits::default().max_output_bytes)
}

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
        max_prompt_bytes: usize,
    ) -> Result<Self, ChatTemplateError> {
        match resolve(choice, loaded) {
            Ok(mut resolved) => {
                let template =
                    Arc::try_unwrap(resolved.template).unwrap_or_else(|shared| (*shared).clone());
                let limits = RenderLimits {
                    max_output_bytes: max_prompt_bytes,
                    ..template.limits()
                };
                resolved.template = Arc::new(template.with_limits(limits));
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

    /// Where the template came from: `model`, `built-in gemma`, `file NAME` (the file's name,
    /// not its path), or `none`.
    pub fn source(&self) -> String {
        match &self.chosen {
            Ok(ResolvedChatTemplate {
                origin: TemplateOrigin::File(path),
                ..
            }) => format!(
                "file {}",
                path.file_name()
                    .map_or_else(|| "(unnamed)".into(), |n| n.to_string_lossy())
            ),
            Ok(resolved) => resolved.origin.to_string(),
            Err(_) => "none".into(),
        }
    }

    /// Renders `messages` with the assistant's turn opened, to token ids: the template's markup
    /// as control tokens, the messages' text as text.
    /// `tools` (when given) are passed to the template as Hugging Face's `apply_chat_template`
    /// passes them. `vars` are further template variables (`chat_template_kwargs`,
    /// `reasoning_effort`). The job's slot (`cancel`) is given back while the template renders,
    /// and taken again to tokenize.
    pub fn render_tokens(
        &self,
        loaded: &LoadedModel,
        messages: &[ChatMessage],
        tools: Option<&Value>,
        vars: &serde_json::Map<String, Value>,
        cancel: &CancelFlag,
    ) -> Result<Vec<u32>, ChatError> {
        let resolved = self
            .chosen
            .as_ref()
            .map_err(|e| ChatError::NoTemplate(e.clone()))?;
        cancel.release_slot();
        let prompt = resolved
            .template
            .render_prompt(messages, tools, vars, true)
            .map_err(ChatError::Template)?;
        cancel.reacquire_slot();
        prompt
            .tokens(&loaded.tokenizer, None)
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
