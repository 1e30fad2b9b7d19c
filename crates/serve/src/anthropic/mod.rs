//! Anthropic's Messages API: `POST /v1/messages` and `POST /v1/messages/count_tokens`.
//!
//! A Messages request becomes the chat request it means ([`request`]): the system prompt a
//! system message, `tool_use` blocks an assistant's `tool_calls`, `tool_result` blocks tool
//! messages, `tools` functions, `tool_choice` `any` OpenAI's `required`. From there it takes
//! the path of `/v1/chat/completions`: the same validation, template, constraints, scheduler
//! and engine (so prefix reuse and speculation work alike), and its answer is read by the same
//! [`crate::tools::ChatOutput`], then written as Anthropic's blocks and events ([`response`]).
//!
//! Errors on these paths, whoever raises them (validation, the key check, the body limit),
//! are answered in Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`, by
//! [`anthropic_errors`].

mod request;
mod response;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use crate::scheduler::job::EventReceiver;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::answer;
use crate::error::ApiError;
use crate::request::Endpoint;
use crate::routes::{receive, submit_request};
use crate::scheduler::job::Event;
use crate::state::AppState;
use crate::tools::ChatOutput;
use crate::validate;
use request::{CountTokensRequest, MessagesRequest};
use response::{MessageMeta, MessageStream, MessageUsage, event};

/// This API's routes.
pub fn routes() -> axum::Router<Arc<AppState>> {
    axum::Router::new()
        .route(PREFIX, axum::routing::post(messages))
        .route(
            "/v1/messages/count_tokens",
            axum::routing::post(count_tokens),
        )
}

/// The path prefix of this API.
const PREFIX: &str = "/v1/messages";

/// `POST /v1/messages`.
pub async fn messages(
    State(state): State<Arc<AppState>>,
    body: Body,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let (served, (validated, stops)) = receive(&state, body, move |bytes, served, cancel| {
        let req: MessagesRequest = crate::request::parse(bytes)?;
        let stops = req.stop_sequences.clone().unwrap_or_default();
        let chat = req.into_chat(false)?;
        Ok((
            validate::validate(chat, Endpoint::Chat, served, cancel)?,
            stops,
        ))
    })
    .await?;
    let output = validated.chat_output();
    let prompt_tokens = validated.request.prompt.len();
    let receiver = submit_request(&state, &served, validated.request, arrived, 1)?;
    let meta = MessageMeta::new(&served.model_id, stops);
    if validated.stream {
        Ok(stream(meta, receiver, output, prompt_tokens))
    } else {
        whole(meta, receiver, output).await
    }
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens, as `/v1/messages` would render it.
pub async fn count_tokens(
    State(state): State<Arc<AppState>>,
    body: Body,
) -> Result<Response, ApiError> {
    let (_served, tokens) = receive(&state, body, move |bytes, served, cancel| {
        let req: CountTokensRequest = crate::request::parse(bytes)?;
        let chat = MessagesRequest::from(req).into_chat(true)?;
        let validated = validate::validate(chat, Endpoint::Chat, served, cancel)?;
        Ok(validated.request.prompt.len())
    })
    .await?;
    Ok(axum::Json(json!({ "input_tokens": tokens })).into_response())
}

async fn whole(
    meta: MessageMeta,
    mut receiver: EventReceiver,
    output: ChatOutput,
) -> Result<Response, ApiError> {
    let answer = answer::whole(&mut receiver).await?;
    let usage = MessageUsage::new(answer.counts);
    let body = response::message(&meta, &output, &answer.text, answer.finish, usage);
    Ok(axum::Json(body).into_response())
}

fn stream(
    meta: MessageMeta,
    receiver: EventReceiver,
    output: ChatOutput,
    prompt_tokens: usize,
) -> Response {
    struct S {
        meta: MessageMeta,
        receiver: EventReceiver,
        events: MessageStream,
        started: bool,
        done: bool,
    }
    let state = S {
        events: MessageStream::new(&output),
        meta,
        receiver,
        started: false,
        done: false,
    };
    let body = futures_util::stream::unfold(state, move |mut s| async move {
        if s.done {
            return None;
        }
        if !std::mem::replace(&mut s.started, true) {
            let out = MessageStream::start(&s.meta, prompt_tokens);
            return Some((Ok::<_, Infallible>(Bytes::from(out)), s));
        }
        let out = match s.receiver.recv().await {
            Some(Event::Delta { text, .. }) => s.events.push(&text),
            Some(Event::Embedding { .. }) => String::new(),
            Some(Event::Done { finish, counts, .. }) => {
                s.done = true;
                s.events.finish(&s.meta, finish, MessageUsage::new(counts))
            }
            Some(Event::Failed(message)) => {
                s.done = true;
                error_event(&ApiError::internal(message))
            }
            None => {
                s.done = true;
                error_event(&ApiError::internal(answer::STOPPED_EARLY))
            }
        };
        Some((Ok(Bytes::from(out)), s))
    });
    answer::event_stream(body)
}

fn error_event(error: &ApiError) -> String {
    event("error", &error_body(error.status, &error.message))
}

/// Anthropic's error type for an HTTP status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// Middleware over every route: an error answered on this API's paths is rewritten from the
/// OpenAI shape every other part of the server writes into Anthropic's (the field at fault, if
/// any, named in the message).
pub async fn anthropic_errors(request: Request, next: Next) -> Response {
    let ours = request.uri().path().starts_with(PREFIX);
    let response = next.run(request).await;
    let status = response.status();
    if !ours || status.is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Error bodies are small; a larger one is not ours to rewrite.
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return (
            status,
            axum::Json(error_body(status, "the error could not be read")),
        )
            .into_response();
    };
    let error = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("error").cloned());
    let Some(error) = error else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let mut message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("request failed")
        .to_string();
    if let Some(param) = error.get("param").and_then(Value::as_str) {
        message = format!("{param}: {message}");
    }
    let body = error_body(status, &message).to_string();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body))
}
