//! The request layer without a model, for the fuzz targets in `fuzz/`: not a stable API.

use std::net::SocketAddr;

use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::request::Endpoint;
use crate::request::{self, DetokenizeRequest, GenerationRequest, TokenizeRequest};
use crate::request_policy::RequestPolicy;
use crate::validate::{self, PromptInput};

/// The endpoints that read a body.
#[derive(Clone, Copy, Debug)]
pub enum BodyEndpoint {
    /// `/v1/completions`.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
    /// `/tokenize`.
    Tokenize,
    /// `/detokenize`.
    Detokenize,
}

/// A refusal: its HTTP status and message.
#[derive(Debug)]
pub struct Refusal {
    /// The status.
    pub status: u16,
    /// The message.
    pub message: String,
}

/// Parses `body` as `endpoint` does and checks it as validation does for a model of `vocab`
/// tokens and a context of `context`, but without tokenizing: a text prompt counts one token
/// per byte, a chat conversation one per byte of its contents.
pub fn check_body(
    endpoint: BodyEndpoint,
    body: &[u8],
    vocab: usize,
    context: usize,
) -> Result<(), Refusal> {
    let refusal = |e: ApiError| {
        // The error object must serialise, whatever the message.
        let _ = e.body().to_string();
        Refusal {
            status: e.status.as_u16(),
            message: e.message,
        }
    };
    let generation = |endpoint: Endpoint| -> Result<(), ApiError> {
        let req: GenerationRequest = request::parse(body)?;
        let checked = validate::check(&req, endpoint, vocab)?;
        let prompt = match &checked.prompt {
            PromptInput::Text(text) => text.len(),
            PromptInput::Ids(ids) => ids.len(),
            PromptInput::Chat(messages) => messages.iter().map(|m| m.content.len()).sum(),
        };
        validate::max_tokens(&req, endpoint, prompt.max(1), context).map(drop)
    };
    match endpoint {
        BodyEndpoint::Completions => generation(Endpoint::Completions),
        BodyEndpoint::Chat => generation(Endpoint::Chat),
        BodyEndpoint::Tokenize => request::parse::<TokenizeRequest>(body).map(drop),
        BodyEndpoint::Detokenize => request::parse::<DetokenizeRequest>(body).map(drop),
    }
    .map_err(refusal)
}

/// Whether a server on `address` with these allowed names serves a request naming `host`,
/// and whether it lets `origin` call cross-origin when these origins are listed.
pub fn check_host_and_origin(
    address: SocketAddr,
    allowed_hosts: &[String],
    cors_origins: &[String],
    host: &str,
    origin: &str,
) -> (bool, bool) {
    let config = ServeConfig {
        allowed_hosts: allowed_hosts.to_vec(),
        cors_origins: cors_origins.to_vec(),
        ..ServeConfig::new("model.gguf".into(), "model".into())
    };
    let policy = RequestPolicy::new(&config, address);
    (policy.host_allowed(host), policy.origin_allowed(origin))
}
