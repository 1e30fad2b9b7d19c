//! The request layer without a model, for the fuzz targets in `fuzz/`: not a stable API.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use crate::blocking::CancelFlag;
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::request::Endpoint;
use crate::request::{self, DetokenizeRequest, GenerationRequest, TokenizeRequest};
use crate::request_policy::RequestPolicy;
use crate::structured::{self, ResponseFormat, StructuredOutput};
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

/// Takes `body` as a request's `response_format` and compiles it as the server does (the size
/// caps, then the compiler on its own thread with a deadline, and its first step), for a
/// vocabulary of the 256 bytes: `Ok` when it compiles, else the refusal the request would get.
pub fn compile_response_format(body: &[u8]) -> Result<(), Refusal> {
    static COMPILER: OnceLock<(
        StructuredOutput,
        Result<Arc<llguidance::ParserFactory>, String>,
    )> = OnceLock::new();
    let (compiler, factory) = COMPILER.get_or_init(|| {
        (
            StructuredOutput::new(),
            structured::byte_factory().map(Arc::new),
        )
    });
    let factory = factory.clone().expect("a factory of the 256 bytes builds");
    let refusal = |e: ApiError| Refusal {
        status: e.status.as_u16(),
        message: e.message,
    };
    let format: ResponseFormat = request::parse(body).map_err(refusal)?;
    let Some(grammar) = structured::format_grammar(Some(&format)).map_err(refusal)? else {
        return Ok(());
    };
    compiler
        .compile_with(factory, grammar, &CancelFlag::default())
        .map(drop)
        .map_err(|e| refusal(e.into_api("response_format", "the JSON schema")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_entry_compiles_schemas_and_refuses_bombs_with_a_400() {
        let ok = br#"{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}"#;
        compile_response_format(ok).unwrap();
        compile_response_format(br#"{"type":"json_object"}"#).unwrap();
        let names: Vec<String> = (0..6_000).map(|i| format!("n{i}")).collect();
        let bomb = serde_json::json!({"type": "json_schema", "json_schema": {"name": "b",
            "schema": {"type": "object", "required": names}}});
        let refusal = compile_response_format(bomb.to_string().as_bytes()).unwrap_err();
        assert_eq!(refusal.status, 400, "{}", refusal.message);
        let refusal = compile_response_format(b"[1]").unwrap_err();
        assert_eq!(refusal.status, 400);
    }
}
