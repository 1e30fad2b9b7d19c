//! OpenAI-compatible HTTP serving for rinfer, with a continuous-batching scheduler.
//!
//! [`serve`] binds the address at once (so `/health` answers 503 while the model loads), loads
//! the model on a dedicated engine thread, and answers `/v1/completions`,
//! `/v1/chat/completions`, Anthropic's `/v1/messages` (and `/v1/messages/count_tokens`),
//! OpenAI's `/v1/responses` (with `GET` and `DELETE /v1/responses/{id}`), `/v1/models`,
//! `/health`, `/metrics`, `/tokenize` and `/detokenize` (and a chat page at `/`) until SIGTERM
//! or Ctrl-C, then drains the requests in flight and returns. [`serve_on`] does the same on a
//! listener the caller bound, until a future the caller gives resolves: the server inside
//! another program (and inside the tests). Every API reaches the engine through the same
//! validation and scheduler.
//!
//! Several models may be served, by name: each request's `model` picks one, loaded on first use
//! into an engine of its own within a memory budget (`models`).
//!
//! An engine thread owns its model, the scratch buffers and a pool of KV caches (one per
//! parallel sequence) and runs one batched forward pass per step over every running sequence
//! plus a chunk of a waiting prompt. It must never run on the async runtime's threads, and the
//! HTTP side must never block on it: requests reach it through a bounded queue, tokens come back
//! through bounded channels whose closing (or filling up: a client that stopped reading)
//! cancels the sequence.
//!
//! Every request is validated before it reaches the engine; anything rinfer does not implement
//! is refused with a 400 that names the field, never ignored.
//!
//! With API keys configured, `/v1/*`, `/tokenize`, `/detokenize` (and `/metrics`, unless
//! opened) answer only requests carrying one as `Authorization: Bearer KEY` or `x-api-key: KEY`.
//!
//! Clients are not trusted: connections are capped and must send their headers and bodies
//! within timeouts, bodies are bounded, the `Host` and `Origin` of a request are checked
//! (against DNS rebinding and cross-site requests), and a request whose client leaves stops
//! its tokenization.

#![forbid(unsafe_code)]

mod answer;
mod anthropic;
mod auth;
mod blocking;
mod chat;
mod compile;
mod config;
mod connections;
mod embeddings;
mod error;
mod grammar;
mod logprob_json;
mod metric_aliases;
mod metrics;
mod models;
mod page;
mod request;
mod request_policy;
mod rerank;
mod response;
mod response_store;
mod responses;
mod routes;
mod scheduler;
mod schema_limits;
mod served;
mod server;
mod speculation_metrics;
mod state;
mod structured;
mod tools;
mod validate;

#[doc(hidden)]
pub mod fuzzing;

pub use auth::ApiKeys;
pub use config::{MAX_PARALLEL, MAX_QUEUE, MAX_THREADS, ModelEntry, ServeConfig};
pub use error::ServeError;
pub use models::{model_name, models_in_dir};
pub use server::{serve, serve_on};
