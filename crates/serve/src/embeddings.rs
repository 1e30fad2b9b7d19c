//! `POST /v1/embeddings`, OpenAI's shape: `input` a string, an array of strings, an array of
//! token ids or an array of such arrays; `encoding_format` `float` or `base64` (little-endian
//! f32); `dimensions` keeps the first values and normalises again; `usage` counts the prompt
//! tokens. Each input becomes one embedding request of the engine, so inputs run batched with
//! each other and with whatever else runs.
//!
//! Only an embedding model (its GGUF has a `pooling_type`) embeds: another model gets a 400,
//! as vLLM answers and as llama-server does for a model without pooling. Texts are tokenized
//! with the model's special tokens (BERT's `[CLS]` … `[SEP]`, a decoder embedder's end
//! token) and control tokens in them are plain text; token arrays run as given. The vector is
//! L2-normalised, as llama-server's default (`embd_normalize = 2`).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use rinfer_model::Request;
use rinfer_model::config::Pooling;
use rinfer_model::engine::normalize;

use crate::blocking::CancelFlag;
use crate::error::ApiError;
use crate::request;
use crate::routes::{receive, submit};
use crate::scheduler::job::{Event, EventSender, Job, event_channel};
use crate::served::Served;
use crate::state::AppState;
use crate::validate::{check_model, encode, token_ids};

/// The most inputs one request may hold (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;

/// The body of `/v1/embeddings`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsRequest {
    pub model: Option<String>,
    /// A string, `[string]`, token ids or `[[ids]]`.
    pub input: Option<Value>,
    /// `float` (the default) or `base64`.
    pub encoding_format: Option<String>,
    /// Keep this many leading values (1 to the model's width), normalised again.
    pub dimensions: Option<u64>,
    /// An end-user id; accepted and not used.
    #[allow(dead_code)]
    pub user: Option<String>,
}

/// A checked request: the prompts to embed and how to write the answer.
#[derive(Debug)]
pub struct Validated {
    /// One tokenized prompt per input, in order.
    pub prompts: Vec<Vec<u32>>,
    /// Vectors as base64 strings instead of number arrays.
    pub base64: bool,
    /// Leading values kept.
    pub dimensions: Option<usize>,
}

/// One input as the request gives it.
enum Input<'a> {
    Text(&'a str),
    Ids(Vec<u32>),
}

/// Checks `req` against the served model and tokenizes its inputs.
pub fn validate(
    req: &EmbeddingsRequest,
    served: &Served,
    queue: usize,
    cancel: &CancelFlag,
) -> Result<Validated, ApiError> {
    check_model(req.model.as_deref(), served)?;
    let config = &served.ready.loaded.model.config;
    match config.pooling {
        None => {
            return Err(ApiError::invalid(
                "model",
                format!(
                    "the model `{}` is not an embedding model (its GGUF has no pooling type): \
                     serve an embedding model (BERT, a Qwen3 embedder, ...) for /v1/embeddings",
                    served.model_id
                ),
            ));
        }
        Some(Pooling::Rank(_)) => {
            return Err(ApiError::invalid(
                "model",
                format!(
                    "the model `{}` is a reranker (pooling type 4, rank): it scores query and \
                     document pairs on /v1/rerank and has no embeddings",
                    served.model_id
                ),
            ));
        }
        Some(_) => {}
    }
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "encoding_format",
                format!("`encoding_format` must be `float` or `base64`, not `{other}`"),
            ));
        }
    };
    let hidden = config.hidden;
    let dimensions = match req.dimensions {
        None => None,
        Some(d) if (1..=hidden as u64).contains(&d) => Some(d as usize),
        Some(d) => {
            return Err(ApiError::invalid(
                "dimensions",
                format!("`dimensions` must be from 1 to {hidden} (the model's width), not {d}"),
            ));
        }
    };
    let inputs = inputs(req.input.as_ref(), config.vocab_size)?;
    if inputs.len() > queue.min(MAX_INPUTS) {
        return Err(ApiError::invalid(
            "input",
            format!(
                "{} inputs are more than the {} one request may hold here (the server's queue); \
                 split them over several requests",
                inputs.len(),
                queue.min(MAX_INPUTS)
            ),
        ));
    }
    let longest = longest_input(served);
    let mut prompts = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.into_iter().enumerate() {
        let prompt = match input {
            Input::Text("") => {
                return Err(ApiError::invalid(
                    "input",
                    format!("input {i} is an empty string"),
                ));
            }
            Input::Text(text) => encode(served, text, true, false, "input", cancel)?,
            Input::Ids(ids) => ids,
        };
        if prompt.len() > longest {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "input {i} has {} tokens; this server embeds at most {longest} tokens per \
                     input (its batch size and context)",
                    prompt.len()
                ),
            )
            .with_code("context_length_exceeded"));
        }
        prompts.push(prompt);
    }
    Ok(Validated {
        prompts,
        base64,
        dimensions,
    })
}

/// The most tokens one pooled input may have: it runs in one pass beside one row of every
/// other sequence, within the context.
pub(crate) fn longest_input(served: &Served) -> usize {
    let settings = &served.ready.settings;
    (settings.max_batch + 1)
        .saturating_sub(settings.max_sequences)
        .min(settings.context)
}

/// The inputs of `input`, in order.
fn inputs(input: Option<&Value>, vocab: usize) -> Result<Vec<Input<'_>>, ApiError> {
    let shape_error = || {
        ApiError::invalid(
            "input",
            "`input` must be a string, an array of strings, an array of token ids, or an array \
             of arrays of token ids",
        )
    };
    let ids = |items: &[Value]| -> Result<Input<'_>, ApiError> {
        if items.is_empty() {
            return Err(ApiError::invalid("input", "an input has no token ids"));
        }
        token_ids("input", items, vocab, shape_error).map(Input::Ids)
    };
    match input {
        None | Some(Value::Null) => Err(ApiError::invalid("input", "`input` is required")),
        Some(Value::String(text)) => Ok(vec![Input::Text(text)]),
        Some(Value::Array(items)) => match items.first() {
            None => Err(ApiError::invalid("input", "`input` is an empty array")),
            Some(Value::Number(_)) => Ok(vec![ids(items)?]),
            Some(Value::String(_)) => items
                .iter()
                .map(|v| v.as_str().map(Input::Text).ok_or_else(shape_error))
                .collect(),
            Some(Value::Array(_)) => items
                .iter()
                .map(|v| v.as_array().ok_or_else(shape_error).and_then(|a| ids(a)))
                .collect(),
            Some(_) => Err(shape_error()),
        },
        Some(_) => Err(shape_error()),
    }
}

/// The route, merged into the server's API routes.
pub fn routes() -> axum::Router<Arc<AppState>> {
    axum::Router::new().route("/v1/embeddings", axum::routing::post(embeddings))
}

/// The handler: validates, queues one engine request per input and answers once all are in.
pub async fn embeddings(
    State(state): State<Arc<AppState>>,
    body: Body,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let queue = state.config.queue;
    let (served, validated) = receive(&state, body, move |bytes, served, cancel| {
        let req: EmbeddingsRequest = request::parse(bytes)?;
        validate(&req, served, queue, cancel)
    })
    .await?;
    let (vectors, prompt_tokens) = pool_all(&state, &served, validated.prompts, arrived).await?;
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, mut v)| {
            if let Some(d) = validated.dimensions {
                v.truncate(d);
            }
            normalize(&mut v);
            let embedding = if validated.base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let body = json!({
        "object": "list",
        "data": data,
        "model": served.model_id,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response())
}

/// Runs each prompt as one embedding request of the engine (batched with each other and with
/// whatever else runs) and returns their pooled rows, in order, and their prompt tokens. At
/// most half the server's queue is in flight at once, the next prompt going in as one is done,
/// so a request may hold more prompts than the queue.
pub(crate) async fn pool_all(
    state: &Arc<AppState>,
    served: &Arc<Served>,
    prompts: Vec<Vec<u32>>,
    arrived: Instant,
) -> Result<(Vec<Vec<f32>>, usize), ApiError> {
    let n = prompts.len();
    let window = (state.config.queue / 2).max(1);
    let (events, mut receiver) = event_channel();
    // Dropped once every prompt is in, so that the channel closes if the engine drops the jobs.
    let mut events = Some(events);
    let mut prompts = prompts.into_iter().enumerate().peekable();
    let mut submit_next = |events: &mut Option<EventSender>| -> Result<(), ApiError> {
        if let (Some((index, prompt)), Some(sender)) = (prompts.next(), events.as_ref()) {
            let job = Job {
                request: Request::embedding(prompt),
                events: sender.clone(),
                arrived,
                choices: 1,
                index,
            };
            submit(state, served, job)?;
        }
        if prompts.peek().is_none() {
            events.take();
        }
        Ok(())
    };
    for _ in 0..window {
        submit_next(&mut events)?;
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; n];
    let mut done = 0;
    let mut prompt_tokens = 0;
    while done < n {
        match receiver.recv().await {
            Some(Event::Embedding { index, embedding }) => vectors[index] = Some(embedding),
            Some(Event::Done { counts, .. }) => {
                prompt_tokens += counts.prompt;
                done += 1;
                submit_next(&mut events)?;
            }
            Some(Event::Delta { .. }) => {}
            Some(Event::Failed(message)) => return Err(ApiError::internal(message)),
            None => {
                return Err(ApiError::internal(
                    "the engine stopped before the pooled rows were done",
                ));
            }
        }
    }
    let vectors = vectors.into_iter().map(Option::unwrap_or_default).collect();
    Ok((vectors, prompt_tokens))
}
