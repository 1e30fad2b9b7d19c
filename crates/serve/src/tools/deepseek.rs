//! DeepSeek's tool calls, between its own markers:
//!
//! - V3 and R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`, a newline,
//!   the arguments in a fenced `json` block, `<｜tool▁call▁end｜>`, further calls, then
//!   `<｜tool▁calls▁end｜>`;
//! - V3.1: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>` inside the same list.
//!
//! Text before the list is content. A call cut short (by `max_tokens`) after whole calls stays
//! text after them; a malformed call makes the whole answer content, as Hermes blocks do.

use serde_json::Value;

use super::call::{ParsedAnswer, ToolCall};

/// Opens the list of calls.
pub const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
/// Closes the list of calls.
pub const CALLS_END: &str = "<｜tool▁calls▁end｜>";
/// Opens one call.
pub const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
/// Closes one call.
pub const CALL_END: &str = "<｜tool▁call▁end｜>";
/// Separates a call's type (V3) or name (V3.1) from the rest.
pub const SEP: &str = "<｜tool▁sep｜>";

/// Every marker of the format.
pub const MARKERS: &[&str] = &[CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP];

/// The calls of `text` and the text around them (`None` when it holds no call, or a malformed
/// one).
pub fn calls(text: &str) -> Option<ParsedAnswer> {
    let start = [CALLS_BEGIN, CALL_BEGIN]
        .iter()
        .filter_map(|m| text.find(m))
        .min()?;
    let mut content = text[..start].to_string();
    let mut rest = text[start..]
        .strip_prefix(CALLS_BEGIN)
        .unwrap_or(&text[start..]);
    let mut calls = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(CALL_BEGIN) {
            let Some((body, next)) = after.split_once(CALL_END) else {
                // Cut short: the whole calls stand, the rest is text.
                if calls.is_empty() {
                    return None;
                }
                content.push_str(rest);
                break;
            };
            calls.push(call_of(body)?);
            rest = next;
        } else {
            if let Some(after) = rest.strip_prefix(CALLS_END) {
                rest = after;
            }
            content.push_str(rest);
            break;
        }
    }
    (!calls.is_empty()).then(|| ParsedAnswer {
        content: content.trim().to_string(),
        calls,
    })
}

/// One call's text between its markers: `TYPE<｜tool▁sep｜>NAME\n```json\n{…}\n```` (V3) or
/// `NAME<｜tool▁sep｜>{…}` (V3.1).
fn call_of(body: &str) -> Option<ToolCall> {
    let (head, tail) = body.split_once(SEP)?;
    let tail = tail.trim();
    let (name, arguments) = if tail.starts_with('{') {
        (head.trim(), tail)
    } else {
        let (name, fenced) = tail.split_once('\n')?;
        let fenced = fenced.trim();
        let json = fenced
            .strip_prefix("```json")
            .or_else(|| fenced.strip_prefix("```"))?
            .strip_suffix("```")?;
        (name.trim(), json.trim())
    };
    let arguments: Value = serde_json::from_str(arguments).ok()?;
    let valid = !name.is_empty() && !name.contains(char::is_whitespace) && arguments.is_object();
    valid.then(|| ToolCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
    })
}
