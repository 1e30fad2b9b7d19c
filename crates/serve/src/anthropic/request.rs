//! The body of `/v1/messages` and `/v1/messages/count_tokens`, parsed strictly, and turned
//! into the chat request every other API becomes (so that one validation, one template and
//! one engine serve them all).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::request::{ChatMessageIn, GenerationRequest};
use crate::tools::{FunctionIn, ToolIn};

/// `/v1/messages`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesRequest {
    /// The model (must be the one served).
    pub model: Option<String>,
    /// The conversation: alternating `user` and `assistant` turns.
    pub messages: Vec<MessageIn>,
    /// The system prompt: a string or text blocks.
    pub system: Option<Value>,
    /// Most tokens to generate (required).
    pub max_tokens: Option<u64>,
    /// Strings that end the answer (not part of it).
    pub stop_sequences: Option<Vec<String>>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<u64>,
    /// Stream server-sent events.
    pub stream: Option<bool>,
    /// Functions the model may call.
    pub tools: Option<Vec<ToolDefinition>>,
    /// `auto`, `any`, `tool` (named) or `none`.
    pub tool_choice: Option<ToolChoiceIn>,
    /// `{"user_id": ...}`: accepted, not used (rinfer keeps no per-user state).
    #[allow(dead_code)]
    pub metadata: Option<Metadata>,
    /// `{"type": "enabled", "budget_tokens": N}` or `{"type": "disabled"}`: the chat template's
    /// `enable_thinking`.
    pub thinking: Option<Thinking>,
    /// rinfer's extension: the sampling seed (the same seed gives the same answer, streamed or
    /// not).
    pub seed: Option<i64>,
}

/// `/v1/messages/count_tokens`: the fields that shape the prompt.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountTokensRequest {
    pub model: Option<String>,
    pub messages: Vec<MessageIn>,
    pub system: Option<Value>,
    pub tools: Option<Vec<ToolDefinition>>,
    pub tool_choice: Option<ToolChoiceIn>,
    pub thinking: Option<Thinking>,
}

impl From<CountTokensRequest> for MessagesRequest {
    fn from(r: CountTokensRequest) -> Self {
        Self {
            model: r.model,
            messages: r.messages,
            system: r.system,
            tools: r.tools,
            tool_choice: r.tool_choice,
            thinking: r.thinking,
            ..Self::default()
        }
    }
}

/// One message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageIn {
    /// `user` or `assistant`.
    pub role: String,
    /// A string or content blocks.
    pub content: Value,
}

/// One entry of `tools`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    /// `custom` (the default); Anthropic's server tools are not available here.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: String,
    pub description: Option<String>,
    /// A JSON schema of the input.
    pub input_schema: Option<Value>,
    /// Prompt caching hints: accepted; rinfer reuses prefixes by itself.
    #[allow(dead_code)]
    pub cache_control: Option<Value>,
}

/// `tool_choice`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolChoiceIn {
    /// `auto`, `any`, `tool` or `none`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function, for `tool`.
    pub name: Option<String>,
    /// At most one call per answer.
    pub disable_parallel_tool_use: Option<bool>,
}

/// `metadata`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    #[allow(dead_code)]
    pub user_id: Option<String>,
}

/// `thinking`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thinking {
    /// `enabled` or `disabled`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Tokens the reasoning may use: accepted; the answer's `max_tokens` bounds both.
    #[allow(dead_code)]
    pub budget_tokens: Option<u64>,
}

impl MessagesRequest {
    /// The chat request this asks for. `count` relaxes what only generation needs
    /// (`max_tokens`).
    pub fn into_chat(self, count: bool) -> Result<GenerationRequest, ApiError> {
        if !count && self.max_tokens.is_none() {
            return Err(ApiError::invalid("max_tokens", "`max_tokens` is required"));
        }
        if let Some(thinking) = &self.thinking
            && !matches!(thinking.kind.as_str(), "enabled" | "disabled")
        {
            return Err(ApiError::invalid(
                "thinking.type",
                "`thinking.type` must be \"enabled\" or \"disabled\"",
            ));
        }
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = &self.system {
            messages.push(ChatMessageIn::text("system", text_of(system, "system")?));
        }
        if self.messages.is_empty() {
            return Err(ApiError::invalid("messages", "`messages` is empty"));
        }
        for (i, message) in self.messages.iter().enumerate() {
            convert_message(i, message, &mut messages)?;
        }
        let (tool_choice, parallel) = match &self.tool_choice {
            None => (None, None),
            Some(choice) => tool_choice(choice)?,
        };
        let tools = ToolIn::convert_all(self.tools, tool)?;
        Ok(GenerationRequest {
            model: self.model,
            messages: Some(messages),
            max_tokens: if count { Some(1) } else { self.max_tokens },
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            stop: self.stop_sequences.map(|s| json!(s)),
            seed: self.seed,
            stream: self.stream,
            tools,
            tool_choice,
            parallel_tool_calls: parallel,
            // Qwen3-style templates read `enable_thinking`.
            chat_template_kwargs: self.thinking.map(|t| {
                let mut vars = serde_json::Map::new();
                vars.insert("enable_thinking".into(), json!(t.kind == "enabled"));
                vars
            }),
            ..GenerationRequest::default()
        })
    }
}

/// The text of a string or of `text` blocks.
fn text_of(value: &Value, param: &str) -> Result<String, ApiError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut text = String::new();
            for (j, block) in blocks.iter().enumerate() {
                let param = format!("{param}[{j}]");
                match block_type(block, &param)? {
                    "text" => text.push_str(block_text(block, &param)?),
                    other => {
                        return Err(ApiError::invalid(
                            param,
                            format!(
                                "blocks of type {other:?} are not supported here; only \"text\" is"
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
        _ => Err(ApiError::invalid(
            param,
            "must be a string or an array of text blocks",
        )),
    }
}

fn block_type<'v>(block: &'v Value, param: &str) -> Result<&'v str, ApiError> {
    block
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(param, "a content block needs a string `type`"))
}

fn block_text<'v>(block: &'v Value, param: &str) -> Result<&'v str, ApiError> {
    block
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(param, "a text block needs a string `text`"))
}

/// Message `i` as chat messages: a user turn's `tool_result` blocks become tool messages
/// (before its text), an assistant turn's `tool_use` blocks its `tool_calls`. Thinking blocks
/// of earlier turns are dropped, as the templates of reasoning models drop them.
fn convert_message(
    i: usize,
    message: &MessageIn,
    out: &mut Vec<ChatMessageIn>,
) -> Result<(), ApiError> {
    let param = format!("messages[{i}].content");
    let role = match message.role.as_str() {
        role @ ("user" | "assistant") => role,
        other => {
            return Err(ApiError::invalid(
                format!("messages[{i}].role"),
                format!("role {other:?} is not supported (user and assistant are)"),
            ));
        }
    };
    let blocks = match &message.content {
        Value::String(s) => {
            out.push(ChatMessageIn::text(role, s.clone()));
            return Ok(());
        }
        Value::Array(blocks) => blocks,
        _ => {
            return Err(ApiError::invalid(
                param,
                "`content` must be a string or an array of content blocks",
            ));
        }
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let param = format!("{param}[{j}]");
        match (block_type(block, &param)?, role) {
            ("text", _) => text.push_str(block_text(block, &param)?),
            ("thinking" | "redacted_thinking", "assistant") => {}
            ("tool_use", "assistant") => {
                let id = block.get("id").and_then(Value::as_str);
                let name = block.get("name").and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(ApiError::invalid(
                        param,
                        "a tool_use block is {\"type\": \"tool_use\", \"id\", \"name\", \"input\"}",
                    ));
                };
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": input.to_string()},
                }));
            }
            ("tool_result", "user") => {
                let id = block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ApiError::invalid(&param, "a tool_result block needs its `tool_use_id`")
                    })?;
                let mut result = match block.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(content) => text_of(content, &format!("{param}.content"))?,
                };
                if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                    result = format!("Error: {result}");
                }
                out.push(ChatMessageIn {
                    tool_call_id: Some(id.to_string()),
                    ..ChatMessageIn::text("tool", result)
                });
            }
            (other, _) => {
                return Err(ApiError::invalid(
                    param,
                    format!(
                        "content blocks of type {other:?} are not supported in a {role} message"
                    ),
                ));
            }
        }
    }
    if !text.is_empty() || !calls.is_empty() || role == "assistant" {
        out.push(ChatMessageIn {
            content: if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                Value::String(text)
            },
            tool_calls: (!calls.is_empty()).then_some(calls),
            ..ChatMessageIn::text(role, String::new())
        });
    }
    Ok(())
}

/// `tool_choice` as OpenAI spells it, and `parallel_tool_calls`.
fn tool_choice(choice: &ToolChoiceIn) -> Result<(Option<Value>, Option<bool>), ApiError> {
    let value = match (choice.kind.as_str(), &choice.name) {
        ("auto", None) => json!("auto"),
        ("any", None) => json!("required"),
        ("none", None) => json!("none"),
        ("tool", Some(name)) => json!({"type": "function", "function": {"name": name}}),
        ("tool", None) => {
            return Err(ApiError::invalid(
                "tool_choice.name",
                "a `tool_choice` of type \"tool\" names the tool",
            ));
        }
        (kind, _) if !matches!(kind, "auto" | "any" | "none") => {
            return Err(ApiError::invalid(
                "tool_choice.type",
                format!("`tool_choice.type` {kind:?} is not one of auto, any, tool or none"),
            ));
        }
        _ => {
            return Err(ApiError::invalid(
                "tool_choice.name",
                "only a `tool_choice` of type \"tool\" names a tool",
            ));
        }
    };
    Ok((Some(value), choice.disable_parallel_tool_use.map(|d| !d)))
}

fn tool(i: usize, t: ToolDefinition) -> Result<FunctionIn, ApiError> {
    if let Some(kind) = t.kind.as_deref()
        && kind != "custom"
    {
        return Err(ApiError::invalid(
            format!("tools[{i}].type"),
            format!("tool type {kind:?} is not available on this server; only \"custom\" is"),
        ));
    }
    Ok(FunctionIn {
        name: t.name,
        description: t.description,
        parameters: t.input_schema,
        strict: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request;

    fn chat(body: Value) -> Result<GenerationRequest, ApiError> {
        request::parse::<MessagesRequest>(body.to_string().as_bytes())?.into_chat(false)
    }

    #[test]
    fn blocks_become_the_chat_conversation() {
        let req = chat(json!({
            "model": "m", "max_tokens": 50,
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should call.", "signature": "x"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
                    {"type": "text", "text": "Thanks."}
                ]}
            ],
            "stop_sequences": ["END"],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "metadata": {"user_id": "u"},
        }))
        .unwrap();
        let messages = req.messages.unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(messages[0].content, "Be brief.");
        assert_eq!(messages[2].content, "Checking.");
        let call = &messages[2].tool_calls.as_ref().unwrap()[0];
        assert_eq!(call["function"]["name"], "get_weather");
        assert_eq!(call["function"]["arguments"], r#"{"city":"Paris"}"#);
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("toolu_1"));
        assert_eq!(messages[3].content, "18 C");
        assert_eq!(req.tool_choice, Some(json!("required")));
        assert_eq!(req.parallel_tool_calls, Some(false));
        assert_eq!(req.stop, Some(json!(["END"])));
        assert_eq!(req.tools.unwrap()[0].function.name, "get_weather");
    }

    #[test]
    fn what_is_not_served_is_refused_naming_the_field() {
        let base = |extra: Value| {
            let mut body =
                json!({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            chat(body).unwrap_err().param
        };
        assert_eq!(
            base(json!({"max_tokens": null})).as_deref(),
            Some("max_tokens")
        );
        assert_eq!(
            base(json!({"service_tier": "auto"})).as_deref(),
            Some("service_tier")
        );
        assert_eq!(
            base(json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}))
                .as_deref(),
            Some("tools[0].type")
        );
        assert_eq!(
            base(json!({"tool_choice": {"type": "tool"}})).as_deref(),
            Some("tool_choice.name")
        );
        assert_eq!(
            base(json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}))
                .as_deref(),
            Some("messages[0].content[0]")
        );
        assert_eq!(
            base(json!({"messages": [{"role": "system", "content": "x"}]})).as_deref(),
            Some("messages[0].role")
        );
    }
}
