//! The JSON bodies clients send, parsed strictly: a field rinfer does not implement is an
//! error naming it, and a wrong type names the field it is in.
//!
//! Fields whose OpenAI type is a union (`prompt`, `stop`, `content`, `logprobs`) are kept as
//! JSON values here and checked in `validate`, where each shape gets its own message.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;
use crate::structured::ResponseFormat;
use crate::tools::ToolIn;

/// Which OpenAI endpoint a request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/completions`.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

/// The body of `/v1/completions` and `/v1/chat/completions` (one struct, so that both accept
/// the same spelling of every shared field; `validate` refuses a field the endpoint lacks).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationRequest {
    pub model: Option<String>,
    /// Completions: a string, `[string]`, token ids or `[[ids]]`.
    pub prompt: Option<Value>,
    /// Chat: the conversation.
    pub messages: Option<Vec<ChatMessageIn>>,
    pub max_tokens: Option<u64>,
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<u64>,
    pub min_p: Option<f32>,
    /// A string or an array of strings.
    pub stop: Option<Value>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    /// Token id (as a string) to a bias in [-100, 100].
    pub logit_bias: Option<BTreeMap<String, f32>>,
    /// Completions: an integer (how many alternatives per token); chat: a boolean.
    pub logprobs: Option<Value>,
    /// Chat: alternatives per token.
    pub top_logprobs: Option<u64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    /// An end-user id; accepted and not used (rinfer keeps no per-user state).
    #[allow(dead_code)]
    pub user: Option<String>,
    /// Choices per request (1 to 16, at most `--parallel`).
    pub n: Option<u64>,
    /// `text`, `json_object` or `json_schema`: the output is constrained to follow it.
    pub response_format: Option<ResponseFormat>,
    /// Chat: functions the model may call.
    pub tools: Option<Vec<ToolIn>>,
    /// Chat: `none`, `auto`, `required` or `{"type": "function", "function": {"name"}}`.
    pub tool_choice: Option<Value>,
    /// Chat: whether an answer may hold several calls (default true).
    pub parallel_tool_calls: Option<bool>,
    /// `false`: no speculative decoding for this request, even when the server speculates
    /// (the text is the same either way).
    pub speculate: Option<bool>,
    /// A Lark grammar (as llguidance reads it) the output follows.
    pub grammar: Option<String>,
    /// A regular expression the whole output matches.
    pub regex: Option<String>,
    /// Chat: `none`, `minimal`, `low`, `medium` or `high`, given to the chat template as the
    /// variable `reasoning_effort` (gpt-oss templates read it).
    pub reasoning_effort: Option<String>,
    /// Chat: further variables for the chat template (`{"enable_thinking": false}` for
    /// Qwen3-style templates), as Hugging Face's `apply_chat_template` takes them.
    pub chat_template_kwargs: Option<serde_json::Map<String, Value>>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// Send a last chunk with the token counts.
    pub include_usage: Option<bool>,
}

/// One chat message as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessageIn {
    pub role: String,
    /// A string or an array of `{"type": "text", "text": ...}` parts (null: an assistant
    /// message that only calls tools).
    #[serde(default)]
    pub content: Value,
    /// Assistant: the calls it made, `{"id", "type": "function", "function": {"name",
    /// "arguments"}}`.
    pub tool_calls: Option<Vec<Value>>,
    /// Tool: the call this result answers.
    pub tool_call_id: Option<String>,
    /// A participant's or function's name.
    pub name: Option<String>,
}

impl ChatMessageIn {
    /// A message of `role` whose content is the text `content`.
    pub fn text(role: &str, content: String) -> Self {
        Self {
            role: role.into(),
            content: Value::String(content),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }
}

/// The body of `/tokenize`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeRequest {
    #[allow(dead_code)]
    pub model: Option<String>,
    /// The text.
    pub content: String,
    /// Add BOS as the model does (default true).
    pub add_special: Option<bool>,
    /// Let control tokens written in the text become their ids (default true).
    pub parse_special: Option<bool>,
}

/// The body of `/detokenize`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetokenizeRequest {
    #[allow(dead_code)]
    pub model: Option<String>,
    /// Token ids.
    pub tokens: Vec<u64>,
}

/// Parses a request body: malformed JSON, a body that is not an object, an unknown field or
/// a wrong type each give a 400 that says which.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: Value = Value::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object".to_string(),
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if let Some(field) = unknown_field(&inner) {
            // The path already ends with the unknown key, except at the top level of some types.
            let param = if path == "." {
                field.to_string()
            } else if path.ends_with(field) {
                path.clone()
            } else {
                format!("{path}.{field}")
            };
            return ApiError::invalid(
                param.clone(),
                format!("unsupported field `{param}`: rinfer does not implement it"),
            );
        }
        if path == "." {
            ApiError::bad_request(format!("invalid request: {inner}"))
        } else {
            ApiError::invalid(path.clone(), format!("invalid `{path}`: {inner}"))
        }
    })
}

/// The field name in serde's "unknown field `x`, expected ..." message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_named() {
        let e = parse::<GenerationRequest>(br#"{"prompt":"a","echo":true}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("echo"));
        let e = parse::<GenerationRequest>(
            br#"{"messages":[{"role":"user","content":"a","audio":"x"}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].audio"));
        let e = parse::<GenerationRequest>(br#"{"stream_options":{"x":1}}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("stream_options.x"));
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = parse::<GenerationRequest>(br#"{"temperature":"hot"}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("temperature"));
        let e = parse::<GenerationRequest>(br#"{"max_tokens":-1}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
    }

    #[test]
    fn malformed_bodies_are_400() {
        for body in [&b"{"[..], b"[]", b"null", b"{} x", b"\xff"] {
            let e = parse::<GenerationRequest>(body).unwrap_err();
            assert_eq!(e.status, 400);
        }
    }
}
