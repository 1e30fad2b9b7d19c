//! The model's text read back into tool calls, for each family's format.
//!
//! Only calls of the functions the request declared are calls: an answer naming any other
//! function (or holding JSON that merely has a `"name"` key) is content, whole, so that a
//! model cannot make the client run something it never offered, and nothing it said is lost.
//!
//! A list of calls cut short (by `max_tokens`) keeps the calls completed before the cut; the
//! unfinished rest stays content. A call identical to an earlier one (same name, same
//! arguments) ends the list: small models repeat their last call until the limit, and a
//! client must not run it twice.

use serde_json::Value;

use super::ToolFormat;
use super::call::{ParsedAnswer, ToolCall};
use super::harmony::Event;

/// Reads `text` as `format` writes calls, accepting only calls of the functions `declared`.
/// Text that holds no well-formed call of a declared function is content.
pub fn parse_calls(text: &str, format: ToolFormat, declared: &[String]) -> ParsedAnswer {
    match any_calls(text, format) {
        Some(mut parsed) if parsed.calls.iter().all(|c| declared.contains(&c.name)) => {
            end_at_first_repeat(&mut parsed.calls);
            parsed
        }
        _ => ParsedAnswer {
            content: text.trim().to_string(),
            calls: Vec::new(),
        },
    }
}

/// Whether `text`, read as `format` writes calls (declared or not), holds a whole call
/// identical to an earlier one.
pub fn repeats_a_call(text: &str, format: ToolFormat) -> bool {
    any_calls(text, format).is_some_and(|p| {
        let mut calls = p.calls;
        let n = calls.len();
        end_at_first_repeat(&mut calls);
        calls.len() < n
    })
}

/// The calls of `text` in `format`, of any function, as written.
fn any_calls(text: &str, format: ToolFormat) -> Option<ParsedAnswer> {
    match format {
        ToolFormat::Hermes => hermes(text),
        ToolFormat::Mistral => json_calls(text.trim().trim_start_matches("[TOOL_CALLS]")),
        ToolFormat::Llama3 => json_calls(text.trim().trim_start_matches("<|python_tag|>")),
        ToolFormat::Generic => json_calls(text),
        ToolFormat::DeepSeekV3 | ToolFormat::DeepSeekV31 => super::deepseek::calls(text),
        ToolFormat::Harmony => harmony_calls(text),
    }
}

/// The calls of a harmony answer, and its content (reasoning left out).
fn harmony_calls(text: &str) -> Option<ParsedAnswer> {
    let mut parsed = ParsedAnswer::default();
    for event in super::harmony::read(text) {
        match event {
            Event::Call(call) => parsed.calls.push(call),
            Event::Content(text) | Event::NotACall(text) => parsed.content.push_str(&text),
            Event::Reasoning(_) => {}
        }
    }
    parsed.content = parsed.content.trim().to_string();
    (!parsed.calls.is_empty()).then_some(parsed)
}

/// Drops every call from the first that repeats an earlier one.
pub(super) fn end_at_first_repeat(calls: &mut Vec<ToolCall>) {
    let repeat = (1..calls.len()).find(|&i| calls[..i].iter().any(|c| same_call(c, &calls[i])));
    if let Some(i) = repeat {
        calls.truncate(i);
    }
}

/// The same function with the same arguments (compared as JSON values when they parse).
fn same_call(a: &ToolCall, b: &ToolCall) -> bool {
    a.name == b.name
        && match (
            serde_json::from_str::<Value>(&a.arguments),
            serde_json::from_str::<Value>(&b.arguments),
        ) {
            (Ok(x), Ok(y)) => x == y,
            _ => a.arguments == b.arguments,
        }
}

/// `<tool_call>{...}</tool_call>` blocks anywhere in the text (the last may be unclosed); a
/// block may also hold a call in Qwen3-Coder's or GLM's tags ([`super::xml`]).
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
            .or_else(|| super::xml::tagged_call(body))
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
/// `;` (Llama 3's parallel calls). A list cut short keeps its whole items.
fn json_calls(text: &str) -> Option<ParsedAnswer> {
    let text = text.trim();
    let values: Vec<Value> = match serde_json::from_str::<Value>(text) {
        Ok(value) => vec![value],
        Err(_) => match text
            .split(';')
            .map(|part| serde_json::from_str(part.trim()).ok())
            .collect::<Option<Vec<Value>>>()
        {
            Some(values) => values,
            None => return cut_list(text),
        },
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

/// A list of calls (`{"tool_calls": [` or `[`) whose end is missing: the items before the cut,
/// and the unfinished rest as content.
fn cut_list(text: &str) -> Option<ParsedAnswer> {
    let items = match text.strip_prefix('{') {
        Some(rest) => {
            let rest = rest.trim_start().strip_prefix("\"tool_calls\"")?;
            rest.trim_start().strip_prefix(':')?.trim_start()
        }
        None => text,
    };
    let mut rest = items.strip_prefix('[')?;
    let mut calls = Vec::new();
    loop {
        rest = rest.trim_start();
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else {
            break;
        };
        calls.push(call_of(&value)?);
        rest = rest[values.byte_offset()..].trim_start();
        match rest.strip_prefix(',') {
            Some(after) => rest = after,
            // The list ended and only its object's end is missing.
            None if rest.starts_with(']') => {
                rest = rest[1..].trim_start().trim_start_matches('}');
                break;
            }
            // Anything but a separator after an item is not a cut list of calls.
            None if rest.is_empty() => break,
            None => return None,
        }
    }
    (!calls.is_empty()).then(|| ParsedAnswer {
        content: rest.trim().to_string(),
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

    fn declared(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn parse(text: &str, format: ToolFormat) -> ParsedAnswer {
        let names = declared(&["get_weather", "time", "search", "a", "b", "f"]);
        parse_calls(text, format, &names)
    }

    #[test]
    fn hermes_blocks_become_calls_and_the_rest_content() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call>";
        let parsed = parse(text, ToolFormat::Hermes);
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
        let parsed = parse(text, ToolFormat::Hermes);
        assert_eq!(parsed.calls, [call("f", "{}")]);
        assert_eq!(parsed.content, "<tool_call>\n{\"na");
    }

    #[test]
    fn llama3_json_with_parameters_becomes_a_call() {
        let text = r#"<|python_tag|>{"name": "search", "parameters": {"q": "rust"}}; {"name": "time", "parameters": {}}"#;
        let parsed = parse(text, ToolFormat::Llama3);
        assert_eq!(
            parsed.calls,
            [call("search", r#"{"q":"rust"}"#), call("time", "{}")]
        );
        assert_eq!(parsed.content, "");
    }

    #[test]
    fn mistral_lists_become_calls() {
        let text = r#"[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]"#;
        let parsed = parse(text, ToolFormat::Mistral);
        assert_eq!(parsed.calls, [call("a", r#"{"x":1}"#), call("b", "{}")]);
        // The marker is a control token, which decoded text leaves out.
        let parsed = parse(&text["[TOOL_CALLS] ".len()..], ToolFormat::Mistral);
        assert_eq!(parsed.calls.len(), 2);
    }

    #[test]
    fn the_generic_format_becomes_calls() {
        let text = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}"#;
        let parsed = parse(text, ToolFormat::Generic);
        assert_eq!(parsed.calls, [call("get_weather", r#"{"city":"Oslo"}"#)]);
    }

    #[test]
    fn text_without_a_well_formed_call_is_content() {
        for (text, format) in [
            ("The weather is fine.", ToolFormat::Hermes),
            ("<tool_call>{not json</tool_call>", ToolFormat::Hermes),
            (r#"{"city": "Paris"}"#, ToolFormat::Generic),
            ("[1, 2]", ToolFormat::Mistral),
            (r#"{"tool_calls": [{"name": "a"}, 7"#, ToolFormat::Generic),
            (r#"{"tool_calls": [{"name": "a"} x"#, ToolFormat::Generic),
        ] {
            let parsed = parse(text, format);
            assert!(parsed.calls.is_empty(), "{text}");
            assert_eq!(parsed.content, text.trim());
        }
    }

    #[test]
    fn only_declared_functions_are_called_and_anything_else_stays_content() {
        let names = declared(&["get_weather"]);
        for (text, format) in [
            (
                r#"{"name": "transfer_all_funds", "arguments": {"to": "x"}}"#,
                ToolFormat::Generic,
            ),
            (r#"{"name": "Ada", "age": 36}"#, ToolFormat::Generic),
            (
                r#"{"tool_calls": [{"name": "get_weather", "arguments": {}}, {"name": "rm", "arguments": {}}]}"#,
                ToolFormat::Generic,
            ),
            (
                "Sure.\n<tool_call>{\"name\": \"transfer_all_funds\", \"arguments\": {}}</tool_call>",
                ToolFormat::Hermes,
            ),
            (
                r#"[{"name": "transfer_all_funds", "arguments": {}}]"#,
                ToolFormat::Mistral,
            ),
            (
                r#"{"name": "transfer_all_funds", "parameters": {}}"#,
                ToolFormat::Llama3,
            ),
        ] {
            let parsed = parse_calls(text, format, &names);
            assert!(parsed.calls.is_empty(), "{format:?}: {text}");
            assert_eq!(
                parsed.content,
                text.trim(),
                "{format:?}: the content is kept"
            );
        }
        let parsed = parse_calls(
            r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#,
            ToolFormat::Generic,
            &names,
        );
        assert_eq!(parsed.calls, [call("get_weather", r#"{"city":"Oslo"}"#)]);
    }

    #[test]
    fn calls_completed_before_the_cut_are_kept() {
        let text = r#"{"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}, {"name": "a", "argu"#;
        let parsed = parse(text, ToolFormat::Generic);
        assert_eq!(parsed.calls, [call("a", r#"{"x":1}"#), call("b", "{}")]);
        assert_eq!(parsed.content, r#"{"name": "a", "argu"#);
        let text = r#"[{"name": "a", "arguments": {}}, {"na"#;
        assert_eq!(parse(text, ToolFormat::Mistral).calls, [call("a", "{}")]);
        // Cut before any whole call: content.
        let text = r#"{"tool_calls": [{"name": "a", "argu"#;
        let parsed = parse(text, ToolFormat::Generic);
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.content, text);
        let text = r#"{"tool_calls": [{"name": "a", "arguments": {}}]"#;
        let parsed = parse(text, ToolFormat::Generic);
        assert_eq!((parsed.calls.len(), parsed.content.as_str()), (1, ""));
    }

    #[test]
    fn a_repeated_identical_call_ends_the_list() {
        let text = r#"{"tool_calls": [{"name": "a", "arguments": {"x": 1, "y": 2}}, {"name": "b", "arguments": {}}, {"name": "a", "arguments": {"y": 2, "x": 1}}, {"name": "b", "arguments": {"z": 0}}, {"name": "a", "ar"#;
        let parsed = parse(text, ToolFormat::Generic);
        assert_eq!(
            parsed.calls,
            [call("a", r#"{"x":1,"y":2}"#), call("b", "{}")]
        );
        assert!(repeats_a_call(text, ToolFormat::Generic));
        // The same function with other arguments is a new call.
        let text = r#"{"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "a", "arguments": {"x": 2}}]}"#;
        assert_eq!(parse(text, ToolFormat::Generic).calls.len(), 2);
        assert!(!repeats_a_call(text, ToolFormat::Generic));
        let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
        assert!(repeats_a_call(text, ToolFormat::Hermes));
        assert_eq!(parse(text, ToolFormat::Hermes).calls, [call("f", "{}")]);
    }
}
