//! `rinfer embed`: the embeddings of texts through the engine, all of them batched together,
//! as JSON (`{"model", "pooling", "dimensions", "embeddings": [[...], ...]}`) or TSV (one
//! line of tab-separated values per text).

use std::io::BufRead;

use anyhow::{Context, Result, bail};
use serde_json::json;

use rinfer_model::EngineSettings;
use rinfer_model::config::Pooling;
use rinfer_model::engine::normalize;

use crate::commands::session::{Session, engine_options};
use crate::options::EmbedOptions;

/// The most texts that run in one pass (each holds a sequence's KV cache for its pass).
const MAX_SEQUENCES: usize = 16;

/// `texts`, or without any every non-empty line of stdin; `what` names them in the error
/// when there are none.
pub(crate) fn texts_or_stdin(texts: &[String], what: &str) -> Result<Vec<String>> {
    let texts = if texts.is_empty() {
        let mut lines = Vec::new();
        for line in std::io::stdin().lock().lines() {
            let line = line.context("cannot read stdin")?;
            if !line.trim().is_empty() {
                lines.push(line);
            }
        }
        lines
    } else {
        texts.to_vec()
    };
    if texts.is_empty() {
        bail!("no {what}: give them as arguments or one per line on stdin");
    }
    Ok(texts)
}

/// Runs the command.
pub fn run(options: &EmbedOptions) -> Result<()> {
    let texts = texts_or_stdin(&options.texts, "text to embed")?;
    let wanted = engine_options(&options.session.engine, None)?;
    let session = Session::start(&options.session, &wanted)?;
    let loaded = &session.setup.loaded;
    let pooling = match loaded.model.config.pooling {
        None => bail!(
            "this {} model is not an embedding model (its GGUF has no pooling type)",
            loaded.model.config.arch
        ),
        Some(Pooling::Rank(_)) => bail!(
            "this {} model is a reranker (pooling type 4, rank): it has no embeddings; score \
             documents with `rinfer rerank`",
            loaded.model.config.arch
        ),
        Some(pooling) => pooling,
    };
    let prompts = texts
        .iter()
        .map(|text| loaded.tokenizer.encode(text, true, false))
        .collect::<Result<Vec<_>, _>>()?;
    let mut embeddings = pool_all(&session, &prompts)?;
    if !options.raw {
        embeddings.iter_mut().for_each(|v| normalize(v));
    }
    let text = if options.tsv {
        embeddings
            .iter()
            .map(|v| {
                let values: Vec<String> = v.iter().map(f32::to_string).collect();
                values.join("\t") + "\n"
            })
            .collect()
    } else {
        let report = json!({
            "model": loaded.model.config.arch,
            "pooling": pooling.name(),
            "dimensions": loaded.model.config.hidden,
            "embeddings": embeddings,
        });
        format!("{report}\n")
    };
    crate::stdout::print(&text)
}

/// The pooled row of each prompt, all batched together in an engine sized for them.
pub(crate) fn pool_all(session: &Session, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(1).max(1);
    if longest > session.context() {
        bail!(
            "a text has {longest} tokens, more than the context of {} tokens (--ctx)",
            session.context()
        );
    }
    let sequences = prompts.len().min(MAX_SEQUENCES);
    let mut engine = session.engine_with(EngineSettings {
        max_sequences: sequences,
        context: longest,
        max_batch: longest + sequences - 1,
        prefix_cache_bytes: 0,
        ..session.setup.settings
    })?;
    Ok(engine.embed(prompts)?)
}
