//! What the parent and the render process say to each other: one JSON line each way.

use serde::{Deserialize, Serialize};

use super::super::literal_spans::PromptText;
use super::super::{ChatMessage, ChatTemplateError, RenderLimits};

/// The first line a render process reads: the template it serves and its limits.
#[derive(Serialize, Deserialize)]
pub(super) struct Setup {
    pub source: String,
    pub bos: String,
    pub eos: String,
    pub fuel: u64,
    pub max_output_bytes: usize,
    pub max_range: usize,
    pub recursion: usize,
    /// The address space the process allows itself, in bytes.
    pub memory_limit_bytes: u64,
}

impl Setup {
    /// Render limits as the template in the process applies them (the parent keeps the
    /// deadline).
    pub fn limits(&self) -> RenderLimits {
        RenderLimits {
            fuel: self.fuel,
            max_output_bytes: self.max_output_bytes,
            max_range: self.max_range,
            recursion: self.recursion,
            ..RenderLimits::default()
        }
    }
}

/// One render.
#[derive(Serialize, Deserialize)]
pub(super) struct Job {
    pub messages: Vec<ChatMessage>,
    pub tools: Option<serde_json::Value>,
    /// Further template variables.
    #[serde(default)]
    pub vars: serde_json::Map<String, serde_json::Value>,
    pub add_generation_prompt: bool,
}

/// The answer to one [`Job`].
#[derive(Serialize, Deserialize)]
pub(super) enum Reply {
    Rendered {
        text: String,
        literal: Vec<(usize, usize)>,
    },
    Rejected(String),
    OutOfFuel(u64),
    OutputTooLarge(usize),
    Failed(String),
}

impl Reply {
    pub fn from_result(result: Result<PromptText, ChatTemplateError>) -> Self {
        match result {
            Ok(prompt) => Reply::Rendered {
                text: prompt.text,
                literal: prompt.literal.iter().map(|r| (r.start, r.end)).collect(),
            },
            Err(ChatTemplateError::Rejected(message)) => Reply::Rejected(message),
            Err(ChatTemplateError::OutOfFuel { fuel }) => Reply::OutOfFuel(fuel),
            Err(ChatTemplateError::OutputTooLarge { limit }) => Reply::OutputTooLarge(limit),
            Err(ChatTemplateError::Render(e)) => Reply::Failed(render_error_text(&e)),
            Err(other) => Reply::Failed(other.to_string()),
        }
    }

    /// The result as the parent returns it. Spans that do not fit the text (a process that
    /// answers nonsense) are an error, not a panic later.
    pub fn into_result(self) -> Result<PromptText, ChatTemplateError> {
        match self {
            Reply::Rendered { text, literal } => {
                let fits = literal.iter().all(|&(s, e)| {
                    s < e && e <= text.len() && text.is_char_boundary(s) && text.is_char_boundary(e)
                });
                let sorted = literal.windows(2).all(|w| w[0].1 <= w[1].0);
                if !(fits && sorted) {
                    return Err(ChatTemplateError::Renderer(
                        "the render process answered spans outside its text".into(),
                    ));
                }
                Ok(PromptText {
                    text,
                    literal: literal.into_iter().map(|(s, e)| s..e).collect(),
                })
            }
            Reply::Rejected(message) => Err(ChatTemplateError::Rejected(message)),
            Reply::OutOfFuel(fuel) => Err(ChatTemplateError::OutOfFuel { fuel }),
            Reply::OutputTooLarge(limit) => Err(ChatTemplateError::OutputTooLarge { limit }),
            Reply::Failed(message) => Err(ChatTemplateError::Render(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                message,
            ))),
        }
    }
}

/// A minijinja error as one line: its description and where in the template.
fn render_error_text(e: &minijinja::Error) -> String {
    match (e.detail(), e.line()) {
        (Some(detail), Some(line)) => format!("{} (line {line})", detail),
        (Some(detail), None) => detail.to_owned(),
        (None, _) => e.kind().to_string(),
    }
}
