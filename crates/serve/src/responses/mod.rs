//! OpenAI's Responses API: `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`.
//!
//! A request's items (after those of the response it continues, when it names a
//! `previous_response_id`) become the chat conversation they mean ([`request`]), which takes
//! the path of `/v1/chat/completions`: the same validation, template, constraints, scheduler
//! and engine. Its answer is read by the same [`ChatOutput`] and written as output items
//! (`reasoning`, `message`, `function_call`) by one builder, whole or as the stream of
//! `response.*` events ([`output`]). Unless `store` is false, the response and its
//! conversation are kept in a bounded store ([`crate::response_store`]) for continuations and
//! `GET`.

mod output;
mod request;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::scheduler::job::EventReceiver;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rinfer_model::FinishReason;
use serde_json::{Map, Value, json};

use crate::answer;
use crate::error::ApiError;
use crate::request::Endpoint;
use crate::response_store::{Stored, random_id};
use crate::routes::{receive, submit_request};
use crate::scheduler::job::{Event, TokenCounts};
use crate::state::AppState;
use crate::tools::{ChatOutput, Delta, StreamShaper};
use crate::validate::{self, Validated};
use output::{OutputBuilder, ResponseHead, status};
use request::ResponsesRequest;

/// This API's routes.
pub fn routes() -> axum::Router<Arc<AppState>> {
    axum::Router::new()
        .route("/v1/responses", axum::routing::post(create))
        .route("/v1/responses/{id}", axum::routing::get(get).delete(delete))
}

/// A request ready for the engine, and what its answer needs.
struct Prepared {
    validated: Validated,
    /// The conversation's items so far (earlier responses' and this request's input).
    items: Vec<Value>,
    echo: Map<String, Value>,
    store: bool,
}

fn not_found(id: &str, param: Option<&str>) -> ApiError {
    let mut error = ApiError {
        status: StatusCode::NOT_FOUND,
        ..ApiError::bad_request(format!(
            "no response with id {id:?} is kept here (it was never stored, was deleted, or expired)"
        ))
    };
    error.param = param.map(str::to_string);
    error
}

/// The request's settings as the response object repeats them.
fn echo(req: &ResponsesRequest) -> Map<String, Value> {
    let value = json!({
        "model": req.model,
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "tools": req.tools.clone().unwrap_or_default(),
        "tool_choice": req.tool_choice.clone().unwrap_or(json!("auto")),
        "parallel_tool_calls": req.parallel_tool_calls.unwrap_or(true),
        "previous_response_id": req.previous_response_id,
        "store": req.store.unwrap_or(true),
        "metadata": req.metadata.clone().unwrap_or_default(),
        "reasoning": req.reasoning.clone().map_or(json!({"effort": null, "summary": null}), |r| json!(r)),
        "text": {"format": req.text.as_ref().and_then(|t| t.format.clone()).unwrap_or(json!({"type": "text"}))},
        "truncation": "disabled",
        "user": req.user,
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `POST /v1/responses`.
pub async fn create(State(state): State<Arc<AppState>>, body: Body) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let shared = Arc::clone(&state);
    let (served, prepared) = receive(&state, body, move |bytes, served, cancel| {
        let req: ResponsesRequest = crate::request::parse(bytes)?;
        let mut items = match &req.previous_response_id {
            Some(id) => {
                shared
                    .responses
                    .get(id)
                    .ok_or_else(|| not_found(id, Some("previous_response_id")))?
                    .items
            }
            None => Vec::new(),
        };
        items.extend(req.input_items()?);
        let echo = echo(&req);
        let store = req.store.unwrap_or(true);
        let chat = req.into_chat(&items)?;
        let validated = validate::validate(chat, Endpoint::Chat, served, cancel)?;
        Ok(Prepared {
            validated,
            items,
            echo,
            store,
        })
    })
    .await?;
    let Prepared {
        validated,
        items,
        mut echo,
        store,
    } = prepared;
    echo.insert("model".into(), json!(served.model_id));
    let output = validated.chat_output();
    let receiver = submit_request(&state, &served, validated.request, arrived, 1)?;
    let answer = Answer {
        head: ResponseHead {
            id: random_id("resp"),
            created_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            echo,
        },
        items,
        store,
        state,
    };
    if validated.stream {
        Ok(stream(answer, receiver, output.stream()))
    } else {
        whole(answer, receiver, &output).await
    }
}

/// What the end of an answer needs.
struct Answer {
    head: ResponseHead,
    items: Vec<Value>,
    store: bool,
    state: Arc<AppState>,
}

impl Answer {
    /// The final response object of `outputs`, kept when asked.
    fn complete(&self, outputs: Vec<Value>, finish: FinishReason, counts: TokenCounts) -> Value {
        let object = self
            .head
            .object(status(finish), outputs.clone(), counts, Some(finish));
        if self.store {
            let mut items = self.items.clone();
            items.extend(outputs);
            self.state.responses.put(
                self.head.id.clone(),
                Stored {
                    response: object.clone(),
                    items,
                },
            );
        }
        object
    }
}

async fn whole(
    answer: Answer,
    mut receiver: EventReceiver,
    output: &ChatOutput,
) -> Result<Response, ApiError> {
    let whole = answer::whole(&mut receiver).await?;
    let (reasoning, content, calls) = output.read(&whole.text);
    let mut deltas = Vec::new();
    deltas.extend(reasoning.map(Delta::Reasoning));
    deltas.push(Delta::Content(content));
    deltas.push(Delta::ToolCalls(calls));
    let mut builder = OutputBuilder::default();
    let mut events = builder.push(deltas);
    let outputs = builder.finish(&mut events);
    let object = answer.complete(outputs, whole.finish, whole.counts);
    Ok(axum::Json(object).into_response())
}

fn stream(answer: Answer, receiver: EventReceiver, shaper: StreamShaper) -> Response {
    struct S {
        answer: Answer,
        receiver: EventReceiver,
        shaper: StreamShaper,
        builder: OutputBuilder,
        started: bool,
        done: bool,
    }
    let state = S {
        answer,
        receiver,
        shaper,
        builder: OutputBuilder::default(),
        started: false,
        done: false,
    };
    let body = futures_util::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        if !std::mem::replace(&mut s.started, true) {
            let object =
                s.answer
                    .head
                    .object("in_progress", Vec::new(), TokenCounts::default(), None);
            let mut out = s
                .builder
                .event("response.created", json!({"response": object.clone()}));
            out += &s
                .builder
                .event("response.in_progress", json!({"response": object}));
            return Some((Ok::<_, Infallible>(Bytes::from(out)), s));
        }
        let out = match s.receiver.recv().await {
            Some(Event::Delta { text, .. }) => {
                let deltas = s.shaper.push(&text);
                s.builder.push(deltas)
            }
            Some(Event::Embedding { .. }) => String::new(),
            Some(Event::Done { finish, counts, .. }) => {
                s.done = true;
                let (deltas, _) = s.shaper.finish();
                let mut out = s.builder.push(deltas);
                let outputs = s.builder.finish(&mut out);
                let object = s.answer.complete(outputs, finish, counts);
                let kind = match finish {
                    FinishReason::Length => "response.incomplete",
                    _ => "response.completed",
                };
                out += &s.builder.event(kind, json!({"response": object}));
                out
            }
            Some(Event::Failed(message)) => {
                s.done = true;
                failed(&mut s.builder, &s.answer.head, &message)
            }
            None => {
                s.done = true;
                failed(&mut s.builder, &s.answer.head, answer::STOPPED_EARLY)
            }
        };
        Some((Ok(Bytes::from(out)), s))
    });
    answer::event_stream(body)
}

fn failed(builder: &mut OutputBuilder, head: &ResponseHead, message: &str) -> String {
    let mut object = head.object("failed", Vec::new(), TokenCounts::default(), None);
    object["error"] = json!({"code": "server_error", "message": message});
    builder.event("response.failed", json!({"response": object}))
}

/// `GET /v1/responses/{id}`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let stored = state
        .responses
        .get(&id)
        .ok_or_else(|| not_found(&id, None))?;
    Ok(axum::Json(stored.response).into_response())
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !state.responses.delete(&id) {
        return Err(not_found(&id, None));
    }
    Ok(axum::Json(json!({"id": id, "object": "response", "deleted": true})).into_response())
}
