//! Calls written as tags inside a `<tool_call>` block instead of JSON, by the families whose
//! templates write them so:
//!
//! - Qwen3-Coder: `<function=NAME>` then `<parameter=KEY>\nVALUE\n</parameter>` per argument,
//!   then `</function>`;
//! - GLM 4.5 and later: `NAME` on the first line, then `<arg_key>KEY</arg_key>` and
//!   `<arg_value>VALUE</arg_value>` per argument.
//!
//! A value is the JSON it spells when it parses as JSON (`3`, `true`, `{"a": 1}`), else the
//! text itself (one newline around it dropped), as vLLM's GLM parser reads values; a function
//! or key that is not closed makes the block no call.

use serde_json::{Map, Value};

use super::call::ToolCall;

/// The call in a `<tool_call>` block's `body`, when it is written in one of the tag formats.
pub fn tagged_call(body: &str) -> Option<ToolCall> {
    let body = body.trim();
    if let Some(rest) = body.strip_prefix("<function=") {
        qwen3_coder(rest)
    } else if body.contains("<arg_key>") {
        glm(body)
    } else {
        None
    }
}

fn value_of(text: &str) -> Value {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let text = text.strip_suffix('\n').unwrap_or(text);
    serde_json::from_str(text.trim()).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn call(name: &str, arguments: Map<String, Value>) -> Option<ToolCall> {
    let name = name.trim();
    (!name.is_empty() && !name.contains(char::is_whitespace)).then(|| ToolCall {
        name: name.to_string(),
        arguments: Value::Object(arguments).to_string(),
    })
}

/// `NAME>` … `</function>` (after `<function=`).
fn qwen3_coder(rest: &str) -> Option<ToolCall> {
    let (name, mut rest) = rest.split_once('>')?;
    let mut arguments = Map::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("<parameter=") {
            let (key, after) = after.split_once('>')?;
            let (value, after) = after.split_once("</parameter>")?;
            arguments.insert(key.trim().to_string(), value_of(value));
            rest = after;
        } else {
            rest.strip_prefix("</function>")?;
            return call(name, arguments);
        }
    }
}

/// `NAME\n<arg_key>K</arg_key><arg_value>V</arg_value>…`.
fn glm(body: &str) -> Option<ToolCall> {
    let (name, mut rest) = body.split_once("<arg_key>")?;
    let mut arguments = Map::new();
    loop {
        let (key, after) = rest.split_once("</arg_key>")?;
        let after = after.trim_start().strip_prefix("<arg_value>")?;
        let (value, after) = after.split_once("</arg_value>")?;
        arguments.insert(key.trim().to_string(), value_of(value));
        let after = after.trim_start();
        if after.is_empty() {
            return call(name, arguments);
        }
        rest = after.strip_prefix("<arg_key>")?;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ToolFormat, parse_calls};
    use super::*;
    use serde_json::json;

    const QWEN3_CODER: &str =
        include_str!("../../../../tests/fixtures/tool_transcripts/qwen3_coder.txt");
    const GLM: &str = include_str!("../../../../tests/fixtures/tool_transcripts/glm4_5.txt");

    fn declared(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn arguments(call: &ToolCall) -> Value {
        serde_json::from_str(&call.arguments).unwrap()
    }

    #[test]
    fn qwen3_coder_transcripts_become_calls_with_typed_values() {
        let parsed = parse_calls(
            QWEN3_CODER,
            ToolFormat::Hermes,
            &declared(&["get_weather", "write_file"]),
        );
        assert_eq!(parsed.content, "I will look up both cities.");
        assert_eq!(parsed.calls.len(), 2);
        assert_eq!(parsed.calls[0].name, "get_weather");
        assert_eq!(
            arguments(&parsed.calls[0]),
            json!({"city": "Paris", "days": 3})
        );
        assert_eq!(parsed.calls[1].name, "write_file");
        assert_eq!(
            arguments(&parsed.calls[1]),
            json!({"path": "notes/a b.txt", "content": "line one\nline <two>",
                   "options": {"append": true}})
        );
    }

    #[test]
    fn glm_transcripts_become_calls() {
        let parsed = parse_calls(GLM, ToolFormat::Hermes, &declared(&["get_weather"]));
        assert_eq!(parsed.content, "Checking the weather.");
        assert_eq!(parsed.calls.len(), 1);
        assert_eq!(parsed.calls[0].name, "get_weather");
        assert_eq!(
            arguments(&parsed.calls[0]),
            json!({"city": "Paris", "days": 3})
        );
    }

    #[test]
    fn unclosed_or_undeclared_tagged_calls_are_content() {
        for body in [
            "<function=f>\n<parameter=a>\n1\n",
            "<function=f>\n<parameter=a>\n1\n</parameter>\n",
            "f\n<arg_key>a</arg_key>",
            "two words\n<arg_key>a</arg_key><arg_value>1</arg_value>",
        ] {
            assert_eq!(tagged_call(body), None, "{body:?}");
        }
        let text = "<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>";
        let parsed = parse_calls(text, ToolFormat::Hermes, &declared(&["f"]));
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.content, text);
    }
}
