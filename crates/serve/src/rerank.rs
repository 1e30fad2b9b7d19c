//! `POST /v1/rerank` (and `/rerank`, `/v1/reranking`, `/reranking`, llama-server's paths):
//! Jina's and Cohere's shape. The request is `{model, query, documents, top_n,
//! return_documents}` with each document a string or `{"text": string}`; the answer is
//! `{model, object: "list", usage, results: [{index, relevance_score, document?}]}`, the
//! results sorted by score, highest first (ties in document order), cut to `top_n`.
//!
//! Only a reranker (its GGUF has pooling type 4, rank) reranks: another model gets a 400, as
//! llama-server refuses a server not started with `--reranking`. Each document is paired with
//! the query as llama-server's `format_prompt_rerank` does (the tokenizer's
//! `encode_rerank`) and runs as one embedding request of the engine, so the pairs run batched
//! with each other and with whatever else runs; its score is the first value of the ranker's
//! head. A request is
//! bounded before any work: at most [`MAX_DOCUMENTS`] documents, [`MAX_PAIR_BYTES`] of text
//! over all pairs, each pair within one pass of the engine and [`MAX_TOTAL_TOKENS`] tokens
//! over all pairs; its pairs go into the server's queue a window at a time, so it may hold
//! more documents than the queue.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use rinfer_model::TokenizerError;
use rinfer_model::config::Pooling;

use crate::blocking::CancelFlag;
use crate::embeddings::{longest_input, pool_all};
use crate::error::ApiError;
use crate::request;
use crate::routes::receive;
use crate::served::Served;
use crate::state::AppState;
use crate::validate::check_model;

/// The most documents one request may rank.
pub const MAX_DOCUMENTS: usize = 1024;

/// The most text over all pairs of a request (the query counts once per document), bytes.
pub const MAX_PAIR_BYTES: usize = 4 << 20;

/// The most tokens over all pairs of a request.
pub const MAX_TOTAL_TOKENS: usize = 1 << 18;

/// The body of `/v1/rerank`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankRequest {
    pub model: Option<String>,
    /// What the documents are ranked for.
    pub query: Option<String>,
    /// Strings, or objects `{"text": string}`.
    pub documents: Option<Vec<Value>>,
    /// Keep the best this many results (all without it).
    pub top_n: Option<u64>,
    /// Put each document's text in its result.
    pub return_documents: Option<bool>,
}

/// A checked request: the pairs to score and how to write the answer.
#[derive(Debug)]
pub struct Validated {
    /// One tokenized query–document pair per document, in order.
    pub pairs: Vec<Vec<u32>>,
    /// The documents' texts, when the answer carries them.
    pub documents: Option<Vec<String>>,
    /// Results kept.
    pub top_n: usize,
}

/// Checks `req` against the served model and tokenizes each query–document pair.
pub fn validate(
    req: &RerankRequest,
    served: &Served,
    cancel: &CancelFlag,
) -> Result<Validated, ApiError> {
    check_model(req.model.as_deref(), served)?;
    if !matches!(
        served.ready.loaded.model.config.pooling,
        Some(Pooling::Rank(_))
    ) {
        return Err(ApiError::invalid(
            "model",
            format!(
                "the model `{}` is not a reranker (its GGUF has no pooling type 4, rank): serve \
                 a reranker (a BERT cross-encoder such as bge-reranker, or Qwen3-Reranker) for \
                 /v1/rerank",
                served.model_id
            ),
        ));
    }
    let query = req
        .query
        .as_deref()
        .ok_or_else(|| ApiError::invalid("query", "`query` is required"))?;
    let documents = documents(req.documents.as_deref())?;
    if documents.len() > MAX_DOCUMENTS {
        return Err(ApiError::invalid(
            "documents",
            format!(
                "{} documents are more than the {MAX_DOCUMENTS} one request may rank; split them \
                 over several requests",
                documents.len()
            ),
        ));
    }
    let bytes = documents
        .iter()
        .map(|d| d.len() + query.len())
        .sum::<usize>();
    if bytes > MAX_PAIR_BYTES {
        return Err(ApiError::invalid(
            "documents",
            format!(
                "the query paired with each document is {bytes} bytes of text, more than the \
                 {MAX_PAIR_BYTES} one request may rank; split the documents over several requests"
            ),
        ));
    }
    let top_n = match req.top_n {
        None => documents.len(),
        Some(0) => {
            return Err(ApiError::invalid("top_n", "`top_n` must be at least 1"));
        }
        Some(n) => usize::try_from(n).map_or(documents.len(), |n| n.min(documents.len())),
    };
    let tokenizer = &served.ready.loaded.tokenizer;
    let longest = longest_input(served);
    let mut total = 0;
    let mut pairs = Vec::with_capacity(documents.len());
    for (i, document) in documents.iter().enumerate() {
        cancel.check()?;
        let pair = tokenizer
            .encode_rerank(query, document, cancel.flag())
            .map_err(|e| match e {
                TokenizerError::Cancelled => ApiError::unavailable("the client left", 0),
                e => ApiError::invalid("documents", e.to_string()),
            })?;
        if pair.len() > longest {
            return Err(ApiError::invalid(
                "documents",
                format!(
                    "the query with document {i} is {} tokens; this server scores at most \
                     {longest} tokens per pair (its batch size and context)",
                    pair.len()
                ),
            )
            .with_code("context_length_exceeded"));
        }
        total += pair.len();
        if total > MAX_TOTAL_TOKENS {
            return Err(ApiError::invalid(
                "documents",
                format!(
                    "the pairs up to document {i} are {total} tokens, more than the \
                     {MAX_TOTAL_TOKENS} one request may rank; split the documents over several \
                     requests"
                ),
            ));
        }
        pairs.push(pair);
    }
    let return_documents = req.return_documents.unwrap_or(false);
    Ok(Validated {
        pairs,
        documents: return_documents.then(|| documents.iter().map(|d| d.to_string()).collect()),
        top_n,
    })
}

/// The texts of `documents`: strings or `{"text": string}`, at least one.
fn documents(documents: Option<&[Value]>) -> Result<Vec<&str>, ApiError> {
    let documents = documents.ok_or_else(|| {
        ApiError::invalid("documents", "`documents` is required: an array of strings")
    })?;
    if documents.is_empty() {
        return Err(ApiError::invalid(
            "documents",
            "`documents` is an empty array",
        ));
    }
    documents
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Value::String(text) => Ok(text.as_str()),
            Value::Object(o) if o.len() == 1 && o.get("text").is_some_and(Value::is_string) => {
                Ok(o["text"].as_str().unwrap_or_default())
            }
            _ => Err(ApiError::invalid(
                "documents",
                format!("document {i} must be a string or an object {{\"text\": string}}"),
            )),
        })
        .collect()
}

/// The routes, merged into the server's API routes.
pub fn routes() -> axum::Router<Arc<AppState>> {
    let route = || axum::routing::post(rerank);
    axum::Router::new()
        .route("/v1/rerank", route())
        .route("/rerank", route())
        .route("/v1/reranking", route())
        .route("/reranking", route())
}

/// The handler: validates, queues one engine request per pair and answers once all are in.
pub async fn rerank(State(state): State<Arc<AppState>>, body: Body) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let (served, validated) = receive(&state, body, |bytes, served, cancel| {
        let req: RerankRequest = request::parse(bytes)?;
        validate(&req, served, cancel)
    })
    .await?;
    let (scores, prompt_tokens) = pool_all(&state, &served, validated.pairs, arrived).await?;
    let body = json!({
        "model": served.model_id,
        "object": "list",
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        "results": results(&scores, validated.documents.as_deref(), validated.top_n),
    });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response())
}

/// The results: each document's index and score (the first value of its pooled row), with
/// its text when given, highest score first (ties in document order), the best `top_n`.
fn results(scores: &[Vec<f32>], documents: Option<&[String]>, top_n: usize) -> Vec<Value> {
    let score = |i: usize| scores[i].first().copied().unwrap_or(f32::NAN);
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    order
        .into_iter()
        .take(top_n)
        .map(|index| {
            let mut result = json!({"index": index, "relevance_score": score(index)});
            if let Some(documents) = documents {
                result["document"] = json!({"text": documents[index]});
            }
            result
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_sorted_by_score_ties_in_document_order_and_cut_to_top_n() {
        let scores = vec![vec![0.5], vec![2.0], vec![0.5], vec![-1.0]];
        let docs: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let indices =
            |r: &[Value]| -> Vec<u64> { r.iter().map(|r| r["index"].as_u64().unwrap()).collect() };
        let all = results(&scores, None, 4);
        assert_eq!(indices(&all), [1, 0, 2, 3]);
        assert!(all.iter().all(|r| r.get("document").is_none()));
        let best = results(&scores, Some(&docs), 2);
        assert_eq!(indices(&best), [1, 0]);
        assert_eq!(best[0]["document"]["text"], "b");
        assert_eq!(best[0]["relevance_score"], 2.0);
    }
}
