//! Chat templates: the Jinja template in `tokenizer.chat_template` rendered the way Hugging
//! Face's `apply_chat_template` renders it, chosen the same way for every front end, run as
//! untrusted code, and tokenized so that a message's text can never become control tokens.
//!
//! - [`resolve_with`] picks the template: a user's `--chat-template FILE|NAME`, else the model's own,
//!   else the built-in format of the model's family ([`builtin`]), else an error that names the
//!   flag. A model template that does not parse is replaced by the built-in format with a
//!   one-line warning.
//! - [`ChatTemplate`] renders within [`RenderLimits`]: minijinja's fuel, an output cap, a
//!   bounded `range`, a recursion limit and, for [`ChatTemplate::render_tokens`], a wall-clock
//!   deadline.
//! - [`ChatTemplate::render_tokens`] renders a conversation to token ids: the template's markup
//!   becomes control tokens, the messages' text stays text.
//!
//! The environment matches transformers': `trim_blocks` and `lstrip_blocks` on, loop controls,
//! `raise_exception(msg)`, the variables `messages`, `bos_token`, `eos_token` and
//! `add_generation_prompt`, and Python string and dict methods (`.strip()`, `.startswith()`,
//! `.items()`, ...) through `minijinja-contrib`'s pycompat layer.

pub mod builtin;
mod limits;
mod literal_spans;
pub mod process;
mod resolve;
mod template;
mod worker;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::tokenizer::TokenizerError;

pub use limits::RenderLimits;
pub use process::{MAX_RENDER_PROCESSES, RenderProcess, serve_renders};
pub use resolve::{ResolvedChatTemplate, TemplateOrigin, resolve_with};
pub use template::{CHAT_TEMPLATE_KEY, ChatTemplate, RenderedPrompt};
pub use worker::MAX_LIVE_WORKERS;

/// Why a chat template could not be chosen, loaded or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    /// The template is not valid Jinja (as far as minijinja can parse it).
    #[error("the chat template does not parse: {0}")]
    Syntax(minijinja::Error),
    /// The template itself rejected the conversation (`raise_exception`).
    #[error("the chat template rejected the conversation: {0}")]
    Rejected(String),
    /// Rendering failed for another reason (an unsupported filter or method, a type error, a
    /// `range` or recursion beyond the limits).
    #[error("the chat template failed to render: {0}")]
    Render(minijinja::Error),
    /// The template used up its fuel: it loops too long or builds too much data.
    #[error(
        "the chat template did more work than its budget of {fuel} steps allows (a loop without \
         end, or data that grows without bound)"
    )]
    OutOfFuel {
        /// The budget ([`RenderLimits::fuel`]).
        fuel: u64,
    },
    /// The template wrote more than the output cap.
    #[error("the chat template wrote more than {limit} bytes")]
    OutputTooLarge {
        /// The cap ([`RenderLimits::max_output_bytes`]).
        limit: usize,
    },
    /// The template did not finish before the deadline.
    #[error("the chat template did not finish within {after:?}")]
    TimedOut {
        /// The deadline ([`RenderLimits::deadline`]).
        after: Duration,
    },
    /// Every render worker is busy ([`MAX_LIVE_WORKERS`] at once), most likely with templates
    /// that do not finish.
    #[error(
        "{workers} chat templates are still rendering (templates that do not finish?); try again \
         later"
    )]
    Busy {
        /// The number of workers.
        workers: usize,
    },
    /// A render process could not be started, or ended without an answer.
    #[error("the chat template could not be rendered: {0}")]
    Renderer(String),
    /// The rendered prompt could not be tokenized (or tokenization was cancelled).
    #[error("the chat prompt cannot be tokenized: {0}")]
    Tokenize(#[from] TokenizerError),
    /// The metadata holds something other than a string under `tokenizer.chat_template`.
    #[error("GGUF metadata key `{CHAT_TEMPLATE_KEY}` should hold a string")]
    NotAString,
    /// `tokenizer_config.json` is not JSON, or its `chat_template` is neither a string nor a
    /// list of named templates.
    #[error("tokenizer_config.json: {0}")]
    TokenizerConfig(String),
    /// A template file given by the user could not be read.
    #[error("cannot read chat template file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `--chat-template` names neither a file nor a built-in format.
    #[error(
        "--chat-template {0:?} is neither a file nor a built-in format (built-in: {names})",
        names = builtin::names().join(", ")
    )]
    UnknownName(String),
    /// Nothing to chat with: the model carries no usable template and no built-in format fits
    /// its vocabulary.
    #[error(
        "this model has no chat template{reason}; give one with --chat-template FILE|NAME \
         (built-in: {names})",
        names = builtin::names().join(", ")
    )]
    NoTemplate {
        /// Why the model's own template is not used, as `" (...)"`, or empty when it has none.
        reason: String,
    },
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` (or whatever roles the template knows).
    pub role: String,
    /// The message text.
    pub content: String,
    /// Other fields templates read, as OpenAI's API and Hugging Face's `apply_chat_template`
    /// name them: `tool_calls` of an assistant message, `tool_call_id` and `name` of a `tool`
    /// message. Rendered as the template writes them (markup, not message text).
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl ChatMessage {
    /// A message with any role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            extra: serde_json::Map::new(),
        }
    }

    /// A `system` message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
}
