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

/// The tool-call formats, by a fuzzer's selector byte.
fn tool_format(selector: u8) -> crate::tools::ToolFormat {
    use crate::tools::ToolFormat;
    match selector % 6 {
        0 => ToolFormat::Generic,
        1 => ToolFormat::Hermes,
        2 => ToolFormat::Llama3,
        3 => ToolFormat::DeepSeekV3,
        4 => ToolFormat::DeepSeekV31,
        _ => ToolFormat::Mistral,
    }
}

/// Reads `text` as an answer of a request declaring three functions, in the tool-call format
/// `selector` picks (generic, Hermes, Llama 3, DeepSeek, Mistral), whole and streamed in pieces of
/// `piece` characters, and checks what every answer must satisfy: only declared
/// functions are called, an answer without calls keeps its text, and the stream calls what
/// the whole answer calls. Panics when one does not hold.
pub fn check_tool_answer(text: &str, selector: u8, piece: usize) {
    use crate::tools::output::{ChatOutput, Delta};
    use crate::tools::parse_calls;
    let format = tool_format(selector);
    let declared: Vec<String> = ["get_weather", "search", "f"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let parsed = parse_calls(text, format, &declared);
    for call in &parsed.calls {
        assert!(declared.contains(&call.name), "called {:?}", call.name);
    }
    if parsed.calls.is_empty() {
        assert_eq!(
            parsed.content,
            text.trim(),
            "an answer without calls is content"
        );
    }
    let output = ChatOutput {
        tools: Some(format),
        declared: declared.into(),
        markup: Default::default(),
    };
    let (message, called) = output.message(text);
    let _ = message.to_string();
    let mut shaper = output.stream();
    let chars: Vec<char> = text.chars().collect();
    let mut streamed = Vec::new();
    for chunk in chars.chunks(piece.max(1)) {
        let _ = shaper.push(&chunk.iter().collect::<String>());
    }
    let (rest, streamed_called) = shaper.finish();
    for delta in rest {
        if let Delta::ToolCalls(calls) = delta {
            streamed.extend(calls);
        }
    }
    assert_eq!(called, streamed_called, "whole and streamed answers agree");
    if called {
        let names: Vec<&str> = message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["function"]["name"].as_str())
            .collect();
        let streamed_names: Vec<&str> = streamed.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, streamed_names, "whole and streamed calls agree");
    }
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
    fn tool_answers_call_only_declared_functions_whole_and_streamed() {
        let answers = [
            r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}"#,
            r#"{"tool_calls": [{"name": "f", "arguments": {}}, {"name": "f", "arguments": {}}, {"na"#,
            r#"{"name": "transfer_all_funds", "arguments": {"to": "x"}}"#,
            "<think>hm</think>Ok.\n<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>",
            "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>",
            r#"[{"name": "f", "arguments": {}}, {"name": "search", "parameters": {"q": 1}}]"#,
            r#"{"name": "search", "parameters": {}}; {"name": "f", "parameters": {}}"#,
            "plain text, no call",
            "",
            "{",
            "<tool_call>",
        ];
        for text in answers {
            for selector in 0..4 {
                for piece in [1, 3, 1000] {
                    check_tool_answer(text, selector, piece);
                }
            }
        }
    }

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
