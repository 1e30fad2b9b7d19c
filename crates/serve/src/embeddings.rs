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
use rinfer_model::engine::normalize;

use crate::blocking::CancelFlag;
use crate::error::ApiError;
use crate::request;
use crate::routes::{parse_blocking, read_body, submit};
use crate::scheduler::job::{Event, Job, event_channel};
use crate::served::Served;
use crate::state::AppState;
use crate::validate::{check_model, encode};

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
    if config.pooling.is_none() {
        return Err(ApiError::invalid(
            "model",
            format!(
                "the model `{}` is not an embedding model (its GGUF has no pooling type): serve \
                 an embedding model (BERT, a Qwen3 embedder, ...) for /v1/embeddings",
                served.model_id
            ),
        ));
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
    let settings = &served.ready.settings;
    let longest = (settings.max_batch + 1)
        .saturating_sub(settings.max_sequences)
        .min(settings.context);
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
        items
            .iter()
            .map(|v| {
                let id = v.as_u64().ok_or_else(shape_error)?;
                if id >= vocab as u64 {
                    return Err(ApiError::invalid(
                        "input",
                        format!("token id {id} is outside the vocabulary of {vocab} tokens"),
                    ));
                }
                Ok(id as u32)
            })
            .collect::<Result<_, _>>()
            .map(Input::Ids)
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
    let bytes = read_body(&state, body).await?;
    let served = state.served(&bytes).await?;
    let queue = state.config.queue;
    let validated = parse_blocking(&state, &served, bytes, move |bytes, served, cancel| {
        let req: EmbeddingsRequest = request::parse(bytes)?;
        validate(&req, served, queue, cancel)
    })
    .await?;
    let n = validated.prompts.len();
    let (events, mut receiver) = event_channel();
    for (index, prompt) in validated.prompts.into_iter().enumerate() {
        let job = Job {
            request: Request::embedding(prompt),
            events: events.clone(),
            arrived,
            choices: 1,
            index,
        };
        submit(&state, &served, job)?;
    }
    drop(events);
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; n];
    let mut done = 0;
    let mut prompt_tokens = 0;
    while done < n {
        match receiver.recv().await {
            Some(Event::Embedding { index, embedding }) => vectors[index] = Some(embedding),
            Some(Event::Done {
                prompt_tokens: p, ..
            }) => {
                prompt_tokens += p;
                done += 1;
            }
            Some(Event::Delta { .. }) => {}
            Some(Event::Failed(message)) => return Err(ApiError::internal(message)),
            None => {
                return Err(ApiError::internal(
                    "the engine stopped before the embeddings were done",
                ));
            }
        }
    }
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| {
            let mut v = v.unwrap_or_default();
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
