//! `rinfer rerank`: a reranker's scores of documents for a query, each document paired with
//! the query as llama-server's `/v1/rerank` does, all pairs batched together, best first, as
//! JSON (`{"model", "query", "results": [{"index", "relevance_score", "document"}, ...]}`) or
//! TSV (one line per document: score, index, text).

use std::sync::atomic::AtomicBool;

use anyhow::{Result, bail};
use serde_json::json;

use rinfer_model::config::Pooling;

use crate::commands::embed::{pool_all, texts_or_stdin};
use crate::commands::session::{Session, engine_options};
use crate::options::RerankOptions;

/// Runs the command.
pub fn run(options: &RerankOptions) -> Result<()> {
    let documents = texts_or_stdin(&options.documents, "documents to rank")?;
    let wanted = engine_options(&options.session.engine, None)?;
    let session = Session::start(&options.session, &wanted)?;
    let loaded = &session.setup.loaded;
    if !matches!(loaded.model.config.pooling, Some(Pooling::Rank(_))) {
        bail!(
            "this {} model is not a reranker (its GGUF has no pooling type 4, rank)",
            loaded.model.config.arch
        );
    }
    let never = AtomicBool::new(false);
    let pairs = documents
        .iter()
        .map(|doc| loaded.tokenizer.encode_rerank(&options.query, doc, &never))
        .collect::<Result<Vec<_>, _>>()?;
    let scores: Vec<f32> = pool_all(&session, &pairs)?
        .iter()
        .map(|row| row.first().copied().unwrap_or(f32::NAN))
        .collect();
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    if let Some(n) = options.top_n {
        order.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let text = if options.tsv {
        order
            .iter()
            .map(|&i| format!("{}\t{i}\t{}\n", scores[i], documents[i]))
            .collect()
    } else {
        let results: Vec<_> = order
            .iter()
            .map(|&i| json!({"index": i, "relevance_score": scores[i], "document": documents[i]}))
            .collect();
        let report = json!({
            "model": loaded.model.config.arch,
            "query": options.query,
            "results": results,
        });
        format!("{report}\n")
    };
    crate::stdout::print(&text)
}
