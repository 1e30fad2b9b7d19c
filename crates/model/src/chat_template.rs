//! Chat templates ([`rinfer_text::chat_template`]), and the choice of one for a loaded model.

pub use rinfer_text::chat_template::*;

use crate::LoadedModel;

/// The chat template for `loaded`: `choice` (the `--chat-template` value: a built-in format's
/// name, else a path to a Jinja file), else the model's own template, else the built-in format
/// whose control tokens the vocabulary has.
///
/// A model template that does not parse does not stop anything: the built-in format replaces
/// it, with [`ResolvedChatTemplate::warning`] saying so in one line.
///
/// ```no_run
/// use rinfer_model::LoadedModel;
/// use rinfer_model::chat_template::{ChatMessage, resolve};
///
/// let loaded = LoadedModel::open("gemma-3-270m-q4_k_m.gguf")?;
/// let chat = resolve(None, &loaded)?;
/// if let Some(warning) = &chat.warning {
///     eprintln!("warning: {warning}");
/// }
/// eprintln!("chat template: {}", chat.origin);
/// let prompt = chat
///     .template
///     .render_tokens(&[ChatMessage::user("Hi")], true, &loaded.tokenizer)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// As [`resolve_with`]: [`ChatTemplateError::UnknownName`] for a `choice` that is neither a
/// format nor a file, [`ChatTemplateError::Read`] / [`ChatTemplateError::Syntax`] for a file that
/// cannot be read or does not parse, [`ChatTemplateError::NoTemplate`] (which names
/// `--chat-template`) when nothing fits.
pub fn resolve(
    choice: Option<&str>,
    loaded: &LoadedModel,
) -> Result<ResolvedChatTemplate, ChatTemplateError> {
    resolve_with(
        choice,
        loaded.chat_template.as_ref(),
        loaded.chat_template_error.as_ref(),
        &loaded.tokenizer,
    )
}
