//! Chat templates from model files are untrusted code: this binary renders them in child
//! processes of itself, which it can kill (see `rinfer_model::chat_template::process`).

use anyhow::{Context, Result};
use rinfer_model::chat_template::{RenderProcess, ResolvedChatTemplate};

/// The hidden command a render process runs.
pub const COMMAND: &str = "render-chat-template";

/// How to start a render process: this binary with [`COMMAND`].
pub fn command() -> Result<RenderProcess> {
    let program =
        std::env::current_exe().context("cannot find this program to render chat templates")?;
    Ok(RenderProcess::new(program, [COMMAND]))
}

/// `chat`, rendered in render processes.
pub fn isolate(chat: ResolvedChatTemplate) -> Result<ResolvedChatTemplate> {
    Ok(chat.in_processes(command()?))
}
