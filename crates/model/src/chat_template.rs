//! Chat templates: the Jinja template in `tokenizer.chat_template` rendered the way Hugging
//! Face's `apply_chat_template` renders it.
//!
//! The environment matches transformers': `trim_blocks` and `lstrip_blocks` on, loop controls,
//! `raise_exception(msg)`, the variables `messages`, `bos_token`, `eos_token` and
//! `add_generation_prompt`, and Python string and dict methods (`.strip()`, `.startswith()`,
//! `.items()`, ...) through `minijinja-contrib`'s pycompat layer.

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{Environment, ErrorKind, Value, context};
use rinfer_formats::gguf::Metadata;
use serde::Serialize;

/// The metadata key that holds the template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

const TEMPLATE_NAME: &str = "chat_template";

/// Marks the errors raised by the template's own `raise_exception`.
const RAISED: &str = "raise_exception: ";

/// Why a chat template could not be loaded or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    /// The template is not valid Jinja (as far as minijinja can parse it).
    #[error("the chat template does not parse: {0:#}")]
    Syntax(minijinja::Error),
    /// The template itself rejected the conversation (`raise_exception`).
    #[error("the chat template rejected the conversation: {0}")]
    Rejected(String),
    /// Rendering failed for another reason (an unsupported filter or method, a type error).
    #[error("the chat template failed to render: {0:#}")]
    Render(minijinja::Error),
    /// The metadata holds something other than a string under `tokenizer.chat_template`.
    #[error("GGUF metadata key `{CHAT_TEMPLATE_KEY}` should hold a string")]
    NotAString,
    /// `tokenizer_config.json` is not JSON, or its `chat_template` is neither a string nor a
    /// list of named templates.
    #[error("tokenizer_config.json: {0}")]
    TokenizerConfig(String),
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` (or whatever roles the template knows).
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with any role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
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

/// A compiled chat template with the BOS/EOS texts it may refer to.
///
/// ```
/// use rinfer_model::chat_template::{ChatMessage, ChatTemplate};
///
/// let t = ChatTemplate::new(
///     "{% for m in messages %}<|{{ m.role }}|>{{ m.content.strip() }}\n{% endfor %}\
///      {% if add_generation_prompt %}<|assistant|>{% endif %}",
///     "<s>",
///     "</s>",
/// )?;
/// let text = t.render(&[ChatMessage::user("  Hi ")], true)?;
/// assert_eq!(text, "<|user|>Hi\n<|assistant|>");
/// # Ok::<(), rinfer_model::chat_template::ChatTemplateError>(())
/// ```
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source`; `bos` and `eos` are the texts of the BOS and EOS tokens.
    pub fn new(
        source: impl Into<String>,
        bos: impl Into<String>,
        eos: impl Into<String>,
    ) -> Result<Self, ChatTemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(ChatTemplateError::Syntax)?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, _> {
            Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!("{RAISED}{msg}"),
            ))
        });
        env.add_template_owned(TEMPLATE_NAME, source.into())
            .map_err(ChatTemplateError::Syntax)?;
        Ok(ChatTemplate {
            env,
            bos: bos.into(),
            eos: eos.into(),
        })
    }

    /// The template in `tokenizer.chat_template`, with BOS/EOS texts taken from
    /// `tokenizer.ggml.tokens` at `tokenizer.ggml.bos_token_id` / `eos_token_id` (empty when
    /// absent). `Ok(None)` when the file has no template.
    pub fn from_metadata(meta: &Metadata) -> Result<Option<Self>, ChatTemplateError> {
        let Some(value) = meta.get(CHAT_TEMPLATE_KEY) else {
            return Ok(None);
        };
        let source = value.as_str().ok_or(ChatTemplateError::NotAString)?;
        let token_text = |key: &str| -> String {
            let tokens = meta.get("tokenizer.ggml.tokens").and_then(|v| v.as_array());
            meta.get(key)
                .and_then(|v| v.as_i128())
                .and_then(|id| usize::try_from(id).ok())
                .and_then(|id| tokens?.get(id))
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_owned()
        };
        let bos = token_text("tokenizer.ggml.bos_token_id");
        let eos = token_text("tokenizer.ggml.eos_token_id");
        Self::new(source, bos, eos).map(Some)
    }

    /// The template of a Hugging Face `tokenizer_config.json` (its text): `chat_template` as a
    /// string, or the one named `default` in a list of named templates; BOS/EOS texts from
    /// `bos_token` / `eos_token`. `Ok(None)` when it has no template.
    pub fn from_tokenizer_config(json: &str) -> Result<Option<Self>, ChatTemplateError> {
        let bad = |msg: String| ChatTemplateError::TokenizerConfig(msg);
        let config: serde_json::Value =
            serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        let source = match config.get("chat_template") {
            None | Some(serde_json::Value::Null) => return Ok(None),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Array(named)) => named
                .iter()
                .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                .and_then(|t| t.get("template")?.as_str())
                .ok_or_else(|| bad("no template named \"default\" in chat_template".into()))?
                .to_owned(),
            Some(_) => return Err(bad("chat_template is neither a string nor a list".into())),
        };
        let token_text = |key: &str| -> String {
            match config.get(key) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v) => v
                    .get("content")
                    .and_then(|c| c.as_str())
                    .unwrap_or("")
                    .to_owned(),
                None => String::new(),
            }
        };
        Self::new(source, token_text("bos_token"), token_text("eos_token")).map(Some)
    }

    /// Renders a conversation; `add_generation_prompt` asks the template to open the
    /// assistant's turn.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(ChatTemplateError::Render)?;
        template
            .render(context! {
                messages => Value::from(Serde(messages)),
                bos_token => self.bos.as_str(),
                eos_token => self.eos.as_str(),
                add_generation_prompt => add_generation_prompt,
            })
            .map_err(|e| {
                let raised = e.detail().and_then(|d| d.strip_prefix(RAISED));
                if let Some(message) = raised {
                    ChatTemplateError::Rejected(message.to_owned())
                } else {
                    ChatTemplateError::Render(e)
                }
            })
    }
}
