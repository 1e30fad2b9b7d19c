//! The model's text read back into tool calls, for each family's format.

use serde_json::Value;

use super::ToolFormat;

/// One call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The function.
    pub name: String,
    /// Its arguments, as JSON text (as OpenAI returns them).
    pub arguments: String,
}

/// What an answer says: text and calls.
#[derive(Debug, Default, PartialEq)]
pub struct ParsedAnswer {
    /// Text outside the calls (trimmed; empty when there is none).
    pub content: String,
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
}

/// Reads `text` as `format` writes calls. Text that holds no well-formed call is content.
pub fn parse_calls(text: &str, format: ToolFormat) -> ParsedAnswer {
    let parsed = match format {
        ToolFormat::Hermes => hermes(text),
        ToolFormat::Mistral => json_calls(text.trim().trim_start_matches("[TOOL_CALLS]")),
        ToolFormat::Llama3 => json_calls(text.trim().trim_start_matches("<|python_tag|>")),
        ToolFormat::Generic => json_calls(text),
    };
    parsed.unwrap_or_else(|| ParsedAnswer {
        content: text.trim().to_string(),
        calls: Vec::new(),
    })
}

/// `<tool_call>{...}</tool_call>` blocks anywhere in the text (the last may be unclosed).
fn hermes(text: &str) -> Option<ParsedAnswer> {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        content.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let (body, next) = match after.find(CLOSE) {
            Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
            None => (after, ""),
        };
        match serde_json::from_str(body.trim())
            .ok()
            .and_then(|v| call_of(&v))
        {
            Some(call) => calls.push(call),
            // A last block cut short (by `max_tokens`) stays text after the whole calls.
            None if next.is_empty() && !calls.is_empty() => {
                content.push_str(&rest[start..]);
                rest = "";
                break;
            }
            None => return None,
        }
        rest = next;
    }
    content.push_str(rest);
    (!calls.is_empty()).then(|| ParsedAnswer {
        content: content.trim().to_string(),
        calls,
    })
}

/// A JSON answer: `{"tool_calls": [...]}`, a list of calls, one call, or calls separated by
/// `;` (Llama 3's parallel calls).
fn json_calls(text: &str) -> Option<ParsedAnswer> {
    let text = text.trim();
    let values: Vec<Value> = match serde_json::from_str::<Value>(text) {
        Ok(value) => vec![value],
        Err(_) => text
            .split(';')
            .map(|part| serde_json::from_str(part.trim()).ok())
            .collect::<Option<_>>()?,
    };
    let mut calls = Vec::new();
    for value in values {
        match value {
            Value::Object(ref object) if object.contains_key("tool_calls") => {
                for item in object.get("tool_calls")?.as_array()? {
                    calls.push(call_of(item)?);
                }
            }
            Value::Array(items) => {
                for item in &items {
                    calls.push(call_of(item)?);
                }
            }
            other => calls.push(call_of(&other)?),
        }
    }
    (!calls.is_empty()).then(|| ParsedAnswer {
        content: String::new(),
        calls,
    })
}

/// `{"name": ..., "arguments"|"parameters": {...}}` (also OpenAI's own shape with `function`).
fn call_of(value: &Value) -> Option<ToolCall> {
    let value = value.get("function").unwrap_or(value);
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return None,
    };
    Some(ToolCall { name, arguments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn hermes_blocks_become_calls_and_the_rest_content() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call>";
        let parsed = parse_calls(text, ToolFormat::Hermes);
        assert_eq!(parsed.content, "Let me look.");
        assert_eq!(
            parsed.calls,
            [
                call("get_weather", r#"{"city":"Paris"}"#),
                call("time", "{}")
            ]
        );
    }

    #[test]
    fn a_hermes_block_cut_short_stays_text_after_the_whole_calls() {
        let text =
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"na";
        let parsed = parse_calls(text, ToolFormat::Hermes);
        assert_eq!(parsed.calls, [call("f", "{}")]);
        assert_eq!(parsed.content, "<tool_call>\n{\"na");
    }

    #[test]
    fn llama3_json_with_parameters_becomes_a_call() {
        let text = r#"<|python_tag|>{"name": "search", "parameters": {"q": "rust"}}; {"name": "time", "parameters": {}}"#;
        let parsed = parse_calls(text, ToolFormat::Llama3);
        assert_eq!(
            parsed.calls,
            [call("search", r#"{"q":"rust"}"#), call("time", "{}")]
        );
        assert_eq!(parsed.content, "");
    }

    #[test]
    fn mistral_lists_become_calls() {
        let text = r#"[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]"#;
        let parsed = parse_calls(text, ToolFormat::Mistral);
        assert_eq!(parsed.calls, [call("a", r#"{"x":1}"#), call("b", "{}")]);
        // The marker is a control token, which decoded text leaves out.
        let parsed = parse_calls(&text["[TOOL_CALLS] ".len()..], ToolFormat::Mistral);
        assert_eq!(parsed.calls.len(), 2);
    }

    #[test]
    fn the_generic_format_becomes_calls() {
        let text = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}"#;
        let parsed = parse_calls(text, ToolFormat::Generic);
        assert_eq!(parsed.calls, [call("get_weather", r#"{"city":"Oslo"}"#)]);
    }

    #[test]
    fn text_without_a_well_formed_call_is_content() {
        for (text, format) in [
            ("The weather is fine.", ToolFormat::Hermes),
            ("<tool_call>{not json</tool_call>", ToolFormat::Hermes),
            (r#"{"city": "Paris"}"#, ToolFormat::Generic),
            ("[1, 2]", ToolFormat::Mistral),
        ] {
            let parsed = parse_calls(text, format);
            assert!(parsed.calls.is_empty(), "{text}");
            assert_eq!(parsed.content, text.trim());
        }
    }
}
