//! Tool calls and results in a conversation's history: checked, given to templates in the
//! shape Hugging Face templates read, or written as text for templates that know no tools.

use rinfer_model::chat_template::ChatMessage;
use serde_json::{Map, Value, json};

use super::ToolPlan;
use super::format::generic_instructions;
use crate::error::ApiError;

/// The fields besides `role` and `content` that message `i` gives its template: `tool_calls`
/// (assistant), `tool_call_id` (tool), `name`. Arguments that are JSON text become objects, as
/// templates expect (`tool_call.arguments | tojson`).
pub fn message_fields(
    i: usize,
    role: &str,
    tool_calls: Option<&[Value]>,
    tool_call_id: Option<&str>,
    name: Option<&str>,
) -> Result<Map<String, Value>, ApiError> {
    let mut extra = Map::new();
    if let Some(calls) = tool_calls {
        if role != "assistant" {
            return Err(ApiError::invalid(
                format!("messages[{i}].tool_calls"),
                "only assistant messages carry `tool_calls`",
            ));
        }
        let mut out = Vec::with_capacity(calls.len());
        for (j, call) in calls.iter().enumerate() {
            let param = format!("messages[{i}].tool_calls[{j}]");
            let function = call.get("function").filter(|f| f.is_object());
            let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
            let (Some(function), Some(name)) = (function, name) else {
                return Err(ApiError::invalid(
                    param,
                    "a tool call is {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}",
                ));
            };
            let arguments = match function.get("arguments") {
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or(Value::String(s.clone()))
                }
                Some(v) => v.clone(),
                None => json!({}),
            };
            out.push(json!({
                "id": call.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }));
        }
        extra.insert("tool_calls".into(), Value::Array(out));
    }
    match (tool_call_id, role) {
        (Some(id), "tool") => {
            extra.insert("tool_call_id".into(), json!(id));
        }
        (None, "tool") => {
            return Err(ApiError::invalid(
                format!("messages[{i}].tool_call_id"),
                "a tool message needs the `tool_call_id` of the call it answers",
            ));
        }
        (Some(_), _) => {
            return Err(ApiError::invalid(
                format!("messages[{i}].tool_call_id"),
                "only tool messages carry `tool_call_id`",
            ));
        }
        (None, _) => {}
    }
    if let Some(name) = name {
        extra.insert("name".into(), json!(name));
    }
    Ok(extra)
}

/// The conversation for a template that knows no tools: the functions and how to call them in
/// a system message, calls in the history written in the generic format, results as user
/// messages, and consecutive messages of one role joined (such templates want turns to
/// alternate).
pub fn generic_conversation(
    messages: Vec<ChatMessage>,
    plan: Option<&ToolPlan>,
) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
    if let Some(plan) = plan {
        out.push(ChatMessage::system(generic_instructions(plan)));
    }
    for mut message in messages {
        if let Some(Value::Array(calls)) = message.extra.get("tool_calls") {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    })
                })
                .collect();
            let written = json!({"tool_calls": calls}).to_string();
            message.content = if message.content.trim().is_empty() {
                written
            } else {
                format!("{}\n{written}", message.content)
            };
        }
        if message.role == "tool" {
            let who = message
                .extra
                .get("name")
                .or_else(|| message.extra.get("tool_call_id"))
                .and_then(Value::as_str)
                .unwrap_or("the function");
            message = ChatMessage::user(format!("Result of {who}: {}", message.content));
        }
        message.extra.clear();
        match out.last_mut() {
            Some(last) if last.role == message.role => {
                last.content.push_str("\n\n");
                last.content.push_str(&message.content);
            }
            _ => out.push(message),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_results_become_alternating_text_turns() {
        let mut call = ChatMessage::assistant("");
        call.extra.insert(
            "tool_calls".into(),
            json!([{"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]),
        );
        let mut result = ChatMessage::new("tool", "18 C");
        result.extra.insert("tool_call_id".into(), json!("c1"));
        let messages = vec![
            ChatMessage::user("Weather in Paris?"),
            call,
            result,
            ChatMessage::user("Thanks. And tomorrow?"),
        ];
        let out = generic_conversation(messages, None);
        let roles: Vec<&str> = out.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            out[1].content,
            r#"{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}"#
        );
        assert_eq!(
            out[2].content,
            "Result of c1: 18 C\n\nThanks. And tomorrow?"
        );
        assert!(out.iter().all(|m| m.extra.is_empty()));
    }
}
