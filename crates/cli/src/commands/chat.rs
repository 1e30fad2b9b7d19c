//! `rinfer chat`: an interactive conversation rendered with the model's chat template.
//!
//! Each turn sends the whole conversation to the same engine, whose prefix cache holds the
//! earlier turns: only the new tokens are evaluated (`--verbose` reports how many).

use std::io::{BufRead, Write};

use anyhow::{Result, bail};
use rinfer_model::Request;
use rinfer_model::chat_template::{ChatMessage, resolve};

use crate::commands::session::{Session, engine_options};
use crate::options::ChatOptions;
use crate::render_process;
use crate::stderr::report;

/// Runs the command until end of input or `/exit`.
pub fn run(options: &ChatOptions) -> Result<()> {
    let wanted = engine_options(
        &options.generation.session.engine,
        Some(&options.generation.speculation),
    )?;
    let session = Session::start(&options.generation.session, &wanted)?;
    let loaded = &session.setup.loaded;
    let chat = render_process::isolate(resolve(
        options.generation.template.chat_template.as_deref(),
        loaded,
    )?)?;
    if let Some(warning) = &chat.warning {
        report!("warning: {warning}");
    }
    let mut engine = session.engine()?;
    let mut messages: Vec<ChatMessage> = options.system.iter().map(ChatMessage::system).collect();
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    report!("chat with the model; an empty line or /exit ends the session");
    loop {
        let _ = write!(std::io::stderr(), "> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() || line == "/exit" {
            break;
        }
        messages.push(ChatMessage::user(line));
        // The template writes BOS itself where the model wants it; message text stays text.
        let tokens = chat
            .template
            .render_tokens(&messages, true, &loaded.tokenizer)?;
        let room = session.context().saturating_sub(tokens.len());
        if room == 0 {
            bail!(
                "the conversation ({} tokens) fills the context of {} tokens; start a new one or \
                 raise --ctx",
                tokens.len(),
                session.context()
            );
        }
        let request = Request::new(tokens, options.max_tokens.min(room))
            .with_sampling(options.generation.sampling.params());
        let out = engine.generate(request, |text| {
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        })?;
        let _ = writeln!(stdout);
        if options.generation.session.verbose {
            let t = &out.timings;
            report!(
                "prompt: {} tokens, {} reused from the cache, {} evaluated in {:.3} s",
                t.prompt_tokens,
                t.cached_tokens,
                t.prompt_tokens - t.cached_tokens,
                t.prefill_s
            );
        }
        messages.push(ChatMessage::assistant(out.text));
    }
    Ok(())
}
