//! `rinfer`, the command-line front end: parses options once, resolves the model (fetching the
//! default one, or pulling one named `org/repo[:QUANT]`, on first use) and hands off to a command. It holds no inference logic of its own.

mod commands;
mod hub;
mod limits;
mod model_cache;
mod options;
mod progress;
mod render_process;
mod stderr;
mod stdout;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::commands::session::model_path;
use crate::options::{CommandOptions, Options};
use crate::stderr::report;

fn main() -> ExitCode {
    match run(Options::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // `{:#}` joins the whole context chain with ": " on one line.
            report!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: Options) -> Result<()> {
    match &options.command {
        CommandOptions::Run(run) => limits::check_sampling(&run.generation.sampling.params())?,
        CommandOptions::Chat(chat) => limits::check_sampling(&chat.generation.sampling.params())?,
        _ => {}
    }
    match options.command {
        CommandOptions::Fetch => commands::fetch::run(),
        CommandOptions::Pull(pull) => commands::pull::run(&pull.model),
        CommandOptions::Inspect(inspect) => {
            let path = model_path(&inspect.path)?;
            commands::inspect::run(&path, inspect.json, inspect.tensors)
        }
        CommandOptions::Run(run) => commands::run::run(&run),
        CommandOptions::Chat(chat) => commands::chat::run(&chat),
        CommandOptions::Tokenize(tokenize) => commands::tokenize::run(&tokenize),
        CommandOptions::Logits(logits) => commands::logits::run(&logits),
        CommandOptions::Embed(embed) => commands::embed::run(&embed),
        CommandOptions::Rerank(rerank) => commands::rerank::run(&rerank),
        CommandOptions::Serve(serve) => commands::serve::run(&serve),
        CommandOptions::RenderChatTemplate => Ok(rinfer_model::chat_template::serve_renders()?),
        CommandOptions::Quantize(q) => {
            let input = commands::pull::resolve_model(&q.input)?;
            commands::quantize::run(&input, &q.output, q.file_type, q.pure, q.imatrix.as_deref())
        }
        CommandOptions::Imatrix(i) => commands::imatrix::run(&i),
        CommandOptions::Convert(c) => {
            commands::convert::run(&c.dir, &c.output, c.outtype.ggml_type())
        }
    }
}
