//! `rinfer tokenize`: the token ids of a text, from a model or vocabulary-only GGUF.

use anyhow::{Context, Result};
use rinfer_formats::gguf::GgufFile;
use rinfer_model::Tokenizer;
use serde_json::json;

use crate::commands::session::model_path;
use crate::options::TokenizeOptions;

/// Runs the command.
pub fn run(options: &TokenizeOptions) -> Result<()> {
    let path = model_path(&options.model)?;
    let file = GgufFile::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    let tokenizer = Tokenizer::from_gguf(file.metadata())?;
    let tokens = tokenizer.encode(&options.text, true, true)?;
    let text = if options.json {
        format!("{}\n", json!({ "tokens": tokens }))
    } else {
        tokens
            .iter()
            .map(|&id| {
                let piece = tokenizer.token_piece(id).unwrap_or_default();
                format!("{id:>8} {:?}\n", String::from_utf8_lossy(piece))
            })
            .collect()
    };
    crate::stdout::print(&text)
}
