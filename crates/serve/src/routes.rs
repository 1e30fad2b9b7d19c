//! The HTTP endpoints. Handlers never block: tokenizing runs on the blocking pool (a job per
//! core at most, stopped when its client leaves), generation on the engine thread, bodies are
//! read within a deadline, and every failure is an OpenAI error object.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::TrySendError;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::LengthLimitError;
use serde_json::{Value, json};

use rinfer_model::FinishReason;

use crate::answer;
use crate::auth;
use crate::blocking::CancelFlag;
use crate::error::ApiError;
use crate::logprob_json::LogprobText;
use crate::page;
use crate::request::Endpoint;
use crate::request::{self, DetokenizeRequest, GenerationRequest, TokenizeRequest};
use crate::request_policy::{self, RequestPolicy};
use crate::response::{self, Choice, ResponseMeta, Usage};
use crate::scheduler::job::{Event, EventReceiver, Job, event_channel};
use crate::served::Served;
use crate::state::AppState;
use crate::tools::{ChatOutput, Delta, StreamShaper, output as tools_output};
use crate::validate::{self, Validated};

/// Every route, behind the host, origin and media-type checks and the request counter; the
/// API (and `/metrics` unless opened) also behind the key check. `apis` are the routes of the
/// other APIs (Messages, Responses), keyed like OpenAI's.
pub fn router(
    state: Arc<AppState>,
    policy: Arc<RequestPolicy>,
    apis: Router<Arc<AppState>>,
) -> Router {
    let keys = Arc::new(auth::KeyCheck::of(&state.config));
    let metrics_route = Router::new().route("/metrics", get(metrics));
    let mut keyed = Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .merge(apis);
    let mut open = Router::new()
        .route("/", get(page::chat_page))
        .route("/health", get(health));
    if state.config.open_metrics {
        open = open.merge(metrics_route);
    } else {
        keyed = keyed.merge(metrics_route);
    }
    keyed
        .route_layer(middleware::from_fn_with_state(keys, auth::require_key))
        .merge(open)
        .route_layer(middleware::from_fn(request_policy::require_json))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            policy,
            request_policy::check_host_and_origin,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            count_responses,
        ))
        .with_state(state)
}

async fn count_responses(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let endpoint = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    state
        .metrics
        .record_request(&endpoint, response.status().as_u16());
    response
}

async fn not_found() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        ..ApiError::bad_request("no such endpoint")
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        ..ApiError::bad_request("method not allowed on this endpoint")
    }
}

/// Reads a whole body: 413 over the limit, 408 when it does not arrive within the body
/// timeout, 503 when a drain starts meanwhile (a half-sent request does not hold the drain).
async fn read_body(state: &AppState, body: Body) -> Result<Bytes, ApiError> {
    let limit = state.config.max_body_bytes;
    let timeout = state.config.body_timeout;
    let mut drain = state.drain.subscribe();
    let read = tokio::select! {
        read = tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)) => read,
        _ = drain.wait_for(|draining| *draining) => {
            return Err(ApiError::unavailable("the server is shutting down", 5).closing());
        }
    };
    match read {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            let error = error.into_inner();
            if error.is::<LengthLimitError>() {
                Err(ApiError {
                    status: StatusCode::PAYLOAD_TOO_LARGE,
                    ..ApiError::bad_request(format!(
                        "the request body is over the limit of {limit} bytes"
                    ))
                }
                .closing())
            } else {
                Err(
                    ApiError::bad_request(format!("cannot read the request body: {error}"))
                        .closing(),
                )
            }
        }
        Err(_) => Err(ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            ..ApiError::bad_request(format!(
                "the request body did not arrive within {} s",
                timeout.as_secs_f64()
            ))
        }
        .closing()),
    }
}

/// What every API handler does first: reads the body ([`read_body`]), finds the model it names
/// ([`AppState::served`]), then parses and validates it with `f` on the blocking pool
/// (tokenizing a long prompt takes a while), bounded to a job per core and cancelled when the
/// client leaves.
pub(crate) async fn receive<T, F>(
    state: &AppState,
    body: Body,
    f: F,
) -> Result<(Arc<Served>, T), ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Bytes, &Served, &CancelFlag) -> Result<T, ApiError> + Send + 'static,
{
    let bytes = read_body(state, body).await?;
    let served = state.served(&bytes).await?;
    let parsing = Arc::clone(&served);
    let parsed = state
        .blocking
        .run(move |cancel| f(&bytes, &parsing, cancel))
        .await?;
    Ok((served, parsed))
}

async fn completions(State(state): State<Arc<AppState>>, body: Body) -> Result<Response, ApiError> {
    generate(state, body, Endpoint::Completions).await
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    body: Body,
) -> Result<Response, ApiError> {
    generate(state, body, Endpoint::Chat).await
}

async fn generate(
    state: Arc<AppState>,
    body: Body,
    endpoint: Endpoint,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let (served, request) = receive(&state, body, move |bytes, served, cancel| {
        let req: GenerationRequest = request::parse(bytes)?;
        validate::validate(req, endpoint, served, cancel)
    })
    .await?;
    let Validated {
        request,
        stream,
        include_usage,
        choices,
        output,
    } = request;
    let logprobs = request.logprobs;
    let receiver = submit_request(&state, &served, request, arrived, choices)?;
    let meta = ResponseMeta::new(endpoint, &served.model_id);
    if stream {
        Ok(stream_response(
            meta,
            receiver,
            choices,
            include_usage,
            logprobs.is_some(),
            output,
        ))
    } else {
        collect_response(meta, receiver, choices, logprobs.is_some(), output).await
    }
}

/// Queues `request` (its `choices` down one event channel) for the engine of `served` and
/// returns where its events arrive; see [`submit`].
pub(crate) fn submit_request(
    state: &AppState,
    served: &Arc<Served>,
    request: rinfer_model::Request,
    arrived: Instant,
    choices: usize,
) -> Result<EventReceiver, ApiError> {
    let (events, receiver) = event_channel();
    let job = Job {
        request,
        events,
        arrived,
        choices,
        index: 0,
    };
    submit(state, served, job)?;
    Ok(receiver)
}

/// Queues a job for the engine of `served`, as the current request's tenant, holding the model
/// in use until the job ends, or answers 503 when the queue is full.
pub(crate) fn submit(state: &AppState, served: &Arc<Served>, mut job: Job) -> Result<(), ApiError> {
    job.request.tenant = auth::current_tenant().unwrap_or(0);
    job.events = job.events.holding(served.clone());
    if state.draining() {
        return Err(ApiError::unavailable("the server is shutting down", 5).closing());
    }
    state.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
    match served.jobs.try_send(job) {
        Ok(()) => Ok(()),
        Err(error) => {
            state.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            Err(match error {
                TrySendError::Full(_) => ApiError::unavailable(
                    "the server is busy: every sequence is running and the queue is full",
                    1,
                ),
                TrySendError::Disconnected(_) => {
                    ApiError::unavailable("the engine is not running", 5)
                }
            })
        }
    }
}

async fn collect_response(
    meta: ResponseMeta,
    mut receiver: EventReceiver,
    choices: usize,
    logprobs: bool,
    output: Option<ChatOutput>,
) -> Result<Response, ApiError> {
    let mut texts = vec![String::new(); choices];
    let mut entries: Vec<_> = (0..choices)
        .map(|_| LogprobText::new(meta.endpoint))
        .collect();
    let mut finishes = vec![None; choices];
    let mut usage = Usage::default();
    while let Some(event) = receiver.recv().await {
        match event {
            Event::Delta {
                index,
                text: piece,
                logprobs,
            } => {
                texts[index].push_str(&piece);
                entries[index].push(&logprobs);
            }
            Event::Done {
                index,
                finish,
                counts,
            } => {
                finishes[index] = Some(finish);
                usage.add_choice(index, counts);
                if finishes.iter().all(Option::is_some) {
                    let choices: Vec<Choice<'_>> = texts
                        .iter()
                        .zip(entries)
                        .zip(&finishes)
                        .map(|((text, entries), finish)| {
                            let finish = finish.expect("every choice finished");
                            let (message, called) = output
                                .as_ref()
                                .map(|o| o.message(text))
                                .map_or((None, false), |(m, called)| (Some(m), called));
                            Choice {
                                text,
                                finish: if called && finish != FinishReason::Length {
                                    TOOL_CALLS_FINISH
                                } else {
                                    finish.api_name()
                                },
                                logprobs: logprobs.then(|| entries.finish()),
                                message,
                            }
                        })
                        .collect();
                    let body = response::full(&meta, choices, usage);
                    return Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response());
                }
            }
            Event::Failed(message) => return Err(ApiError::internal(message)),
            Event::Embedding { .. } => {}
        }
    }
    Err(ApiError::internal(answer::STOPPED_EARLY))
}

/// Where a stream is.
struct StreamState {
    meta: ResponseMeta,
    receiver: EventReceiver,
    include_usage: bool,
    logprobs: bool,
    /// Per choice: the chat role chunk is still to be sent.
    opening: Vec<bool>,
    /// Per choice: completions' `text_offset` of the next token.
    offsets: Vec<usize>,
    /// Per choice, chat: reasoning and tool calls split from the answer.
    shapers: Vec<Option<StreamShaper>>,
    /// Choices not finished yet.
    left: usize,
    usage: Usage,
    done: bool,
}

/// The `finish_reason` of an answer that calls tools (one cut by `max_tokens` keeps `length`).
const TOOL_CALLS_FINISH: &str = "tool_calls";

/// The chunks of shaped deltas; `logprobs` (of the tokens that released them) go with the
/// first, or alone when the tokens released nothing yet.
fn delta_events(
    meta: &ResponseMeta,
    index: usize,
    deltas: Vec<Delta>,
    logprobs: Option<Value>,
) -> String {
    let mut chunks: Vec<Value> = deltas
        .into_iter()
        .map(|delta| {
            let delta = match delta {
                Delta::Content(text) => json!({"content": text}),
                Delta::Reasoning(text) => json!({"reasoning_content": text}),
                // Calls are sent once, whole, at the end: their indices start at 0.
                Delta::ToolCalls(calls) => {
                    json!({"tool_calls": tools_output::calls_json(&calls, 0, true)})
                }
            };
            response::chat_chunk(meta, index, delta, None)
        })
        .collect();
    if let Some(logprobs) = logprobs {
        if chunks.is_empty() {
            chunks.push(response::chat_chunk(meta, index, json!({}), None));
        }
        chunks[0]["choices"][0]["logprobs"] = logprobs;
    }
    chunks.iter().map(sse).collect()
}

fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

impl StreamState {
    /// The chat role chunk of choice `index`, the first time only.
    fn open(&mut self, index: usize, out: &mut String) {
        if std::mem::take(&mut self.opening[index]) {
            let chunk = response::chunk(&self.meta, index, Some(""), true, None, None);
            out.push_str(&sse(&chunk));
        }
    }
}

fn stream_response(
    meta: ResponseMeta,
    receiver: EventReceiver,
    choices: usize,
    include_usage: bool,
    logprobs: bool,
    output: Option<ChatOutput>,
) -> Response {
    let chat = meta.endpoint == Endpoint::Chat;
    let state = StreamState {
        meta,
        receiver,
        include_usage,
        logprobs,
        opening: vec![chat; choices],
        offsets: vec![0; choices],
        shapers: (0..choices)
            .map(|_| output.as_ref().map(ChatOutput::stream))
            .collect(),
        left: choices,
        usage: Usage::default(),
        done: false,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        let mut out = String::new();
        match s.receiver.recv().await {
            Some(Event::Delta {
                index,
                text,
                logprobs,
            }) => {
                s.open(index, &mut out);
                let endpoint = s.meta.endpoint;
                let offset = &mut s.offsets[index];
                let logprobs = s
                    .logprobs
                    .then(|| response::logprobs_json(endpoint, &logprobs, offset));
                match s.shapers[index].as_mut() {
                    // Shaped text goes out as it is released, log-probabilities as they come.
                    Some(shaper) => {
                        let deltas = shaper.push(&text);
                        out.push_str(&delta_events(&s.meta, index, deltas, logprobs));
                    }
                    None => out.push_str(&sse(&response::chunk(
                        &s.meta,
                        index,
                        Some(&text),
                        false,
                        logprobs,
                        None,
                    ))),
                }
            }
            Some(Event::Done {
                index,
                finish,
                counts,
            }) => {
                s.open(index, &mut out);
                let mut called = false;
                if let Some(shaper) = s.shapers[index].as_mut() {
                    let (deltas, calls) = shaper.finish();
                    called = calls;
                    out.push_str(&delta_events(&s.meta, index, deltas, None));
                }
                let text = (s.meta.endpoint == Endpoint::Completions).then_some("");
                let mut last = response::chunk(&s.meta, index, text, false, None, Some(finish));
                if called && finish != FinishReason::Length {
                    last["choices"][0]["finish_reason"] = json!(TOOL_CALLS_FINISH);
                }
                out.push_str(&sse(&last));
                s.usage.add_choice(index, counts);
                s.left -= 1;
                if s.left == 0 {
                    if s.include_usage {
                        out.push_str(&sse(&response::usage_chunk(&s.meta, s.usage)));
                    }
                    out.push_str("data: [DONE]\n\n");
                    s.done = true;
                }
            }
            Some(Event::Embedding { .. }) => {}
            Some(Event::Failed(message)) => {
                out.push_str(&sse(&ApiError::internal(message).body()));
                out.push_str("data: [DONE]\n\n");
                s.done = true;
            }
            None => {
                let error = ApiError::internal(answer::STOPPED_EARLY);
                out.push_str(&sse(&error.body()));
                out.push_str("data: [DONE]\n\n");
                s.done = true;
            }
        }
        Some((Ok::<_, Infallible>(Bytes::from(out)), s))
    });
    answer::event_stream(stream)
}

async fn models(State(state): State<Arc<AppState>>) -> Response {
    let data = state.models.list(|model| {
        let mut entry = json!({
            "id": model.id,
            "object": "model",
            "created": state.started,
            "owned_by": "rinfer",
            "state": model.state.name(),
        });
        if let Some(served) = model.served {
            let settings = served.ready.settings;
            entry["memory_bytes"] = json!(model.memory_bytes);
            entry["context_length"] = json!(settings.context);
            entry["parallel"] = json!(settings.max_sequences);
            entry["device"] = json!(served.device.kind());
            entry["chat_template"] = json!(served.chat.source());
        }
        entry
    });
    axum::Json(json!({ "object": "list", "data": data })).into_response()
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    let (status, text) = if state.draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    } else if state.models.engine_stopped() {
        (StatusCode::SERVICE_UNAVAILABLE, "engine stopped")
    } else if state.models.starting() {
        (StatusCode::SERVICE_UNAVAILABLE, "loading")
    } else {
        (StatusCode::OK, "ok")
    };
    let models: serde_json::Map<String, Value> = state
        .models
        .list(|model| (model.id.to_string(), json!(model.state.name())))
        .into_iter()
        .collect();
    (
        status,
        axum::Json(json!({ "status": text, "models": models })),
    )
        .into_response()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render_for(auth::current_tenant()),
    )
        .into_response()
}

async fn tokenize(State(state): State<Arc<AppState>>, body: Body) -> Result<Response, ApiError> {
    let (_served, tokens) = receive(&state, body, |bytes, served, cancel| {
        let req: TokenizeRequest = request::parse(bytes)?;
        validate::check_model(req.model.as_deref(), served)?;
        validate::encode(
            served,
            &req.content,
            req.add_special.unwrap_or(true),
            req.parse_special.unwrap_or(true),
            "content",
            cancel,
        )
    })
    .await?;
    Ok(axum::Json(json!({ "tokens": tokens })).into_response())
}

async fn detokenize(State(state): State<Arc<AppState>>, body: Body) -> Result<Response, ApiError> {
    let (_served, content) = receive(&state, body, |bytes, served, _| {
        let req: DetokenizeRequest = request::parse(bytes)?;
        validate::check_model(req.model.as_deref(), served)?;
        let tokenizer = &served.ready.loaded.tokenizer;
        let vocab = tokenizer.vocab_size();
        let ids = req
            .tokens
            .iter()
            .map(|&id| {
                u32::try_from(id)
                    .ok()
                    .filter(|&id| (id as usize) < vocab)
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "tokens",
                            format!("token id {id} is outside the vocabulary of {vocab} tokens"),
                        )
                    })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        Ok(tokenizer.decode(&ids))
    })
    .await?;
    Ok(axum::Json(json!({ "content": content })).into_response())
}
