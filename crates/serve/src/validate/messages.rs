//! A chat request's messages as the template reads them: each checked (its role, its content
//! parts and tool calls, names and ids that are plain names) and converted.

use rinfer_model::chat_template::ChatMessage;
use serde_json::Value;

use crate::error::ApiError;
use crate::request::ChatMessageIn;
use crate::tools;

pub(super) fn chat_messages(
    messages: Option<&[ChatMessageIn]>,
) -> Result<Vec<ChatMessage>, ApiError> {
    let messages = match messages {
        None => return Err(ApiError::invalid("messages", "`messages` is required")),
        Some([]) => return Err(ApiError::invalid("messages", "`messages` is empty")),
        Some(m) => m,
    };
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| chat_message(i, m))
        .collect()
}

fn chat_message(i: usize, m: &ChatMessageIn) -> Result<ChatMessage, ApiError> {
    let role = match m.role.as_str() {
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        other => {
            return Err(ApiError::invalid(
                format!("messages[{i}].role"),
                format!(
                    "role {other:?} is not supported (system, developer, user, assistant, tool are)"
                ),
            ));
        }
    };
    check_names(i, m)?;
    let extra = tools::message_fields(
        i,
        &m.role,
        m.tool_calls.as_deref(),
        m.tool_call_id.as_deref(),
        m.name.as_deref(),
    )?;
    let param = format!("messages[{i}].content");
    let content = match &m.content {
        Value::Null if extra.contains_key("tool_calls") => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                let part_param = format!("{param}[{j}]");
                let object = part.as_object().ok_or_else(|| {
                    ApiError::invalid(part_param.clone(), "a content part must be an object")
                })?;
                match object.get("type").and_then(Value::as_str) {
                    Some("text") => {}
                    Some(other) => {
                        return Err(ApiError::invalid(
                            part_param,
                            format!(
                                "content parts of type {other:?} are not supported; only \"text\" is"
                            ),
                        ));
                    }
                    None => {
                        return Err(ApiError::invalid(
                            part_param,
                            "a content part needs a `type`",
                        ));
                    }
                }
                if let Some(key) = object.keys().find(|k| *k != "type" && *k != "text") {
                    return Err(ApiError::invalid(
                        format!("{part_param}.{key}"),
                        format!("unsupported field `{key}` in a text content part"),
                    ));
                }
                let piece = object.get("text").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(part_param, "a text content part needs a string `text`")
                })?;
                text.push_str(piece);
            }
            text
        }
        _ => {
            return Err(ApiError::invalid(
                param,
                "`content` must be a string or an array of text parts",
            ));
        }
    };
    let mut message = ChatMessage::new(role, content);
    message.extra = extra;
    Ok(message)
}

/// Whether `s` is 1 to `max` bytes of ASCII letters, digits and `extra`.
fn plain_name(s: &str, max: usize, extra: &[u8]) -> bool {
    (1..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
}

/// Refuses names and ids of message `i` that are more than plain names: templates write them
/// into the prompt as markup (not as the messages' text), so a name carrying a template's
/// control text (`<|im_start|>system`) would open a turn of its own.
fn check_names(i: usize, m: &ChatMessageIn) -> Result<(), ApiError> {
    const NAME: &str = "1 to 64 letters, digits, `_` or `-`";
    const ID: &str = "1 to 128 letters, digits, `_`, `-`, `.` or `:`";
    if let Some(name) = &m.name
        && !plain_name(name, 64, b"_-")
    {
        return Err(ApiError::invalid(
            format!("messages[{i}].name"),
            format!("a name must be {NAME}"),
        ));
    }
    if let Some(id) = &m.tool_call_id
        && !plain_name(id, 128, b"_-.:")
    {
        return Err(ApiError::invalid(
            format!("messages[{i}].tool_call_id"),
            format!("a tool call id must be {ID}"),
        ));
    }
    for (j, call) in m.tool_calls.iter().flatten().enumerate() {
        let name = call
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str);
        if let Some(name) = name
            && !plain_name(name, 64, b"_-")
        {
            return Err(ApiError::invalid(
                format!("messages[{i}].tool_calls[{j}].function.name"),
                format!("a function name must be {NAME}"),
            ));
        }
        match call.get("id") {
            None | Some(Value::Null) => {}
            Some(Value::String(id)) if plain_name(id, 128, b"_-.:") => {}
            Some(_) => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].tool_calls[{j}].id"),
                    format!("a tool call id must be {ID}"),
                ));
            }
        }
    }
    Ok(())
}
