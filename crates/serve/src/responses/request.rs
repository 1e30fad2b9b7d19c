//! The body of `POST /v1/responses`, parsed strictly, and its items turned into the chat
//! conversation every API becomes.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::request::{ChatMessageIn, GenerationRequest};
use crate::structured::ResponseFormat;
use crate::tools::{FunctionIn, ToolIn};

/// `POST /v1/responses`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponsesRequest {
    pub model: Option<String>,
    /// A string (one user message) or a list of items.
    pub input: Value,
    /// A system message for this response only (not carried to continuations).
    pub instructions: Option<String>,
    /// The response this one continues: its input and output come before `input`.
    pub previous_response_id: Option<String>,
    pub max_output_tokens: Option<u64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub stream: Option<bool>,
    /// Keep the response for `GET` and continuations (default true).
    pub store: Option<bool>,
    /// Function tools, flat: `{"type": "function", "name", "description", "parameters"}`.
    pub tools: Option<Vec<FunctionTool>>,
    /// `auto`, `none`, `required` or `{"type": "function", "name"}`.
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    /// `{"effort", "summary"}`: `effort` is the chat template's `reasoning_effort`.
    pub reasoning: Option<Reasoning>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", ...}}`.
    pub text: Option<TextOptions>,
    /// Up to 16 string pairs, returned with the response.
    pub metadata: Option<Map<String, Value>>,
    /// Accepted and not used.
    #[allow(dead_code)]
    pub user: Option<String>,
    /// `disabled` only: nothing is truncated.
    pub truncation: Option<String>,
    /// rinfer's extension: the sampling seed.
    pub seed: Option<i64>,
}

/// One function tool.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionTool {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `reasoning`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Reasoning {
    pub effort: Option<String>,
    pub summary: Option<String>,
}

/// `text`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextOptions {
    pub format: Option<Value>,
}

/// `text.format` as chat's `response_format`: the Responses API writes the schema's fields
/// beside `type` instead of under `json_schema`.
fn response_format(format: &Value) -> Result<ResponseFormat, ApiError> {
    let shaped = match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let mut inner = format.clone();
            if let Some(object) = inner.as_object_mut() {
                object.remove("type");
            }
            json!({"type": "json_schema", "json_schema": inner})
        }
        _ => format.clone(),
    };
    serde_json::from_value(shaped)
        .map_err(|e| ApiError::invalid("text.format", format!("invalid `text.format`: {e}")))
}

impl ResponsesRequest {
    /// The request's own input as items (a string is one user message).
    pub fn input_items(&self) -> Result<Vec<Value>, ApiError> {
        match &self.input {
            Value::String(s) => Ok(vec![
                json!({"type": "message", "role": "user", "content": s}),
            ]),
            Value::Array(items) => Ok(items.clone()),
            _ => Err(ApiError::invalid(
                "input",
                "`input` must be a string or an array of items",
            )),
        }
    }

    /// The chat request for the conversation `items` (earlier responses' items, then this
    /// request's input).
    pub fn into_chat(self, items: &[Value]) -> Result<GenerationRequest, ApiError> {
        if let Some(t) = self.truncation.as_deref()
            && t != "disabled"
        {
            return Err(ApiError::invalid(
                "truncation",
                "only `truncation: \"disabled\"` is supported: nothing is truncated",
            ));
        }
        let mut messages = Vec::with_capacity(items.len() + 1);
        if let Some(instructions) = &self.instructions {
            messages.push(ChatMessageIn::text("system", instructions.clone()));
        }
        for (i, item) in items.iter().enumerate() {
            convert_item(i, item, &mut messages)?;
        }
        if messages.is_empty() {
            return Err(ApiError::invalid("input", "`input` is empty"));
        }
        let tools = ToolIn::convert_all(self.tools, function_tool)?;
        let tool_choice = self.tool_choice.map(|choice| match &choice {
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
                json!({"type": "function", "function": {"name": o.get("name")}})
            }
            _ => choice,
        });
        let response_format = self
            .text
            .and_then(|t| t.format)
            .map(|f| response_format(&f))
            .transpose()?;
        Ok(GenerationRequest {
            model: self.model,
            messages: Some(messages),
            max_tokens: self.max_output_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            stream: self.stream,
            tools,
            tool_choice,
            parallel_tool_calls: self.parallel_tool_calls,
            response_format,
            reasoning_effort: self.reasoning.and_then(|r| r.effort),
            ..GenerationRequest::default()
        })
    }
}

fn function_tool(i: usize, t: FunctionTool) -> Result<FunctionIn, ApiError> {
    if t.kind != "function" {
        return Err(ApiError::invalid(
            format!("tools[{i}].type"),
            format!(
                "tool type {:?} is not available on this server; only \"function\" is",
                t.kind
            ),
        ));
    }
    Ok(FunctionIn {
        name: t.name,
        description: t.description,
        parameters: t.parameters,
        strict: t.strict,
    })
}

fn text_field<'v>(item: &'v Value, key: &str, param: &str) -> Result<&'v str, ApiError> {
    item.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(param, format!("needs a string `{key}`")))
}

/// Item `i` as chat messages: messages as they are, `function_call` items as the assistant's
/// `tool_calls` (joined to the assistant message before them), `function_call_output` items
/// as tool messages; reasoning items are dropped, as reasoning models' templates drop them.
fn convert_item(i: usize, item: &Value, out: &mut Vec<ChatMessageIn>) -> Result<(), ApiError> {
    let param = format!("input[{i}]");
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    match kind {
        "message" => {
            let role = match text_field(item, "role", &param)? {
                "developer" => "system",
                role @ ("system" | "user" | "assistant") => role,
                other => {
                    return Err(ApiError::invalid(
                        format!("{param}.role"),
                        format!("role {other:?} is not supported"),
                    ));
                }
            };
            let text = match item.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => {
                    let mut text = String::new();
                    for (j, part) in parts.iter().enumerate() {
                        let part_param = format!("{param}.content[{j}]");
                        match part.get("type").and_then(Value::as_str) {
                            Some("input_text" | "output_text" | "text") => {
                                text.push_str(text_field(part, "text", &part_param)?);
                            }
                            other => {
                                return Err(ApiError::invalid(
                                    part_param,
                                    format!(
                                        "content parts of type {other:?} are not supported; only text is"
                                    ),
                                ));
                            }
                        }
                    }
                    text
                }
                _ => {
                    return Err(ApiError::invalid(
                        format!("{param}.content"),
                        "`content` must be a string or an array of text parts",
                    ));
                }
            };
            out.push(ChatMessageIn::text(role, text));
        }
        "function_call" => {
            let call = json!({
                "id": text_field(item, "call_id", &param)?,
                "type": "function",
                "function": {
                    "name": text_field(item, "name", &param)?,
                    "arguments": text_field(item, "arguments", &param)?,
                },
            });
            match out.last_mut() {
                Some(last) if last.role == "assistant" => {
                    last.tool_calls.get_or_insert_with(Vec::new).push(call);
                }
                _ => out.push(ChatMessageIn {
                    content: Value::Null,
                    tool_calls: Some(vec![call]),
                    ..ChatMessageIn::text("assistant", String::new())
                }),
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            out.push(ChatMessageIn {
                tool_call_id: Some(text_field(item, "call_id", &param)?.to_string()),
                ..ChatMessageIn::text("tool", output)
            });
        }
        "reasoning" => {}
        other => {
            return Err(ApiError::invalid(
                format!("{param}.type"),
                format!("input items of type {other:?} are not supported"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_become_the_chat_conversation() {
        let req: ResponsesRequest = crate::request::parse(
            json!({
                "input": [],
                "instructions": "Be brief.",
                "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
                "tool_choice": {"type": "function", "name": "get_weather"},
                "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
            })
            .to_string()
            .as_bytes(),
        )
        .unwrap();
        let items = [
            json!({"role": "user", "content": "Weather in Paris?"}),
            json!({"type": "reasoning", "id": "rs_1", "summary": []}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "18 C"}),
        ];
        let chat = req.into_chat(&items).unwrap();
        let messages = chat.messages.unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(messages[2].content, "Checking.");
        assert_eq!(messages[2].tool_calls.as_ref().unwrap()[0]["id"], "c1");
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(
            chat.tool_choice,
            Some(json!({"type": "function", "function": {"name": "get_weather"}}))
        );
        assert!(matches!(
            chat.response_format,
            Some(ResponseFormat::JsonSchema { .. })
        ));
    }

    #[test]
    fn unsupported_items_and_fields_are_refused_naming_them() {
        let req = |body: Value| {
            crate::request::parse::<ResponsesRequest>(body.to_string().as_bytes()).and_then(|r| {
                let items = r.input_items()?;
                r.into_chat(&items)
            })
        };
        let e = req(json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}))
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input[0].content[0]"));
        let e = req(json!({"input": "hi", "background": true})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("background"));
        let e = req(json!({"input": "hi", "tools": [{"type": "web_search", "name": "w"}]}))
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools[0].type"));
        let e = req(json!({"input": [{"type": "item_reference", "id": "x"}]})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input[0].type"));
        let e = req(json!({"input": 5})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input"));
    }
}
