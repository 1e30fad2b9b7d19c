//! Choosing the chat template, the same way for every front end (`rinfer chat`, `rinfer serve`):
//! the user's `--chat-template FILE|NAME`, else the model's own template, else the built-in
//! format of the model's family, else an error that names the flag.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ChatTemplate, ChatTemplateError, RenderProcess, builtin};
use crate::tokenizer::Tokenizer;

/// Where the template in use came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// A Jinja file the user gave.
    File(PathBuf),
    /// The model file's own template.
    Model,
    /// A built-in format, by name.
    Builtin(&'static str),
}

impl fmt::Display for TemplateOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateOrigin::File(path) => write!(f, "file {}", path.display()),
            TemplateOrigin::Model => f.write_str("model"),
            TemplateOrigin::Builtin(name) => write!(f, "built-in {name}"),
        }
    }
}

/// The template to chat with, where it came from, and what to tell the user about the choice.
#[derive(Clone, Debug)]
pub struct ResolvedChatTemplate {
    /// The template (shared: rendering runs it on a worker thread).
    pub template: Arc<ChatTemplate>,
    /// Where it came from.
    pub origin: TemplateOrigin,
    /// One line to show once: why the model's own template is not the one used.
    pub warning: Option<String>,
}

impl ResolvedChatTemplate {
    /// The same choice, rendered in child processes that `process` starts (see
    /// [`ChatTemplate::in_processes`]).
    pub fn in_processes(mut self, process: RenderProcess) -> Self {
        let template = Arc::try_unwrap(self.template).unwrap_or_else(|shared| (*shared).clone());
        self.template = Arc::new(template.in_processes(process));
        self
    }
}

/// The chat template from the parts of a model (`rinfer_model::chat_template::resolve` takes a
/// loaded model): its own template, why it has none that can be used
/// (when it carries one that does not parse), and its tokenizer (for the BOS/EOS texts and the
/// family's control tokens).
pub fn resolve_with(
    choice: Option<&str>,
    own: Option<&Arc<ChatTemplate>>,
    own_error: Option<&ChatTemplateError>,
    tokenizer: &Tokenizer,
) -> Result<ResolvedChatTemplate, ChatTemplateError> {
    let text = |id: Option<u32>| {
        id.and_then(|id| tokenizer.token_text(id))
            .unwrap_or("")
            .to_owned()
    };
    let (bos, eos) = (text(tokenizer.bos()), text(tokenizer.eos()));
    let compiled = |source: &str| ChatTemplate::new(source, bos.clone(), eos.clone()).map(Arc::new);

    if let Some(choice) = choice {
        if let Some(format) = builtin::by_name(choice) {
            return Ok(ResolvedChatTemplate {
                template: compiled(format.source)?,
                origin: TemplateOrigin::Builtin(format.name),
                warning: None,
            });
        }
        let path = Path::new(choice);
        if !path.is_file() {
            return Err(ChatTemplateError::UnknownName(choice.to_owned()));
        }
        let source = std::fs::read_to_string(path).map_err(|source| ChatTemplateError::Read {
            path: path.to_owned(),
            source,
        })?;
        return Ok(ResolvedChatTemplate {
            template: compiled(&source)?,
            origin: TemplateOrigin::File(path.to_owned()),
            warning: None,
        });
    }

    if let Some(template) = own {
        return Ok(ResolvedChatTemplate {
            template: Arc::clone(template),
            origin: TemplateOrigin::Model,
            warning: None,
        });
    }
    let family = builtin::for_vocabulary(|t| tokenizer.token_id(t).is_some());
    match (family, own_error) {
        (Some(format), error) => Ok(ResolvedChatTemplate {
            template: compiled(format.source)?,
            origin: TemplateOrigin::Builtin(format.name),
            warning: error.map(|e| {
                format!(
                    "the model's chat template cannot be used ({}); using the built-in {} format",
                    one_line(e),
                    format.name
                )
            }),
        }),
        (None, error) => Err(ChatTemplateError::NoTemplate {
            reason: error
                .map(|e| format!(" that can be used ({})", one_line(e)))
                .unwrap_or_default(),
        }),
    }
}

/// An error's message on one line.
fn one_line(e: &ChatTemplateError) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
