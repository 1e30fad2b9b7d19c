//! Tool calls: `tools`, `tool_choice` and `parallel_tool_calls` of a chat request, the tool
//! calls and results of its history, and the model's output parsed back into `tool_calls`.
//!
//! A template that reads `tools` (the models trained for tool calls: Qwen, Hermes, Llama 3.1,
//! Mistral, gpt-oss, DeepSeek) gets them as Hugging Face's `apply_chat_template` gives them, and
//! the model's own call format is parsed ([`ToolFormat`]); the format's markers that are control
//! tokens are kept in the generated text for the parser ([`ToolFormat::markers`]), which takes
//! them out again. A template that knows no tools (the default model)
//! gets the generic format instead: a system message lists the functions and asks for
//! `{"tool_calls": [{"name": ..., "arguments": {...}}]}`; calls and results in the history are
//! written as text the same way. With `tool_choice` `required` or a named function, the output
//! is constrained to calls whose arguments follow the function's JSON schema, and ends at the
//! first call that repeats an earlier one ([`RepeatGuard`]).
//!
//! `parallel_tool_calls` defaults to `true`, as OpenAI's does: an answer may hold several
//! calls. Only calls of the declared functions are read back as calls (see [`parse_calls`]).

mod call;
mod deepseek;
mod format;
mod harmony;
mod history;
pub mod output;
mod parse;
mod repeat;
#[cfg(test)]
mod transcript_tests;
mod xml;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;
pub use call::ToolCall;
pub use format::{ToolFormat, call_grammar};
pub use history::{generic_conversation, message_fields};
pub use output::{ChatOutput, Delta, Markup, StreamShaper};
pub use parse::parse_calls;
pub use repeat::RepeatGuard;

/// One entry of `tools`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolIn {
    /// Must be `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionIn,
}

/// `tools[].function`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionIn {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON schema of its arguments (absent: no arguments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Accepted; arguments follow the schema whenever the output is constrained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl ToolIn {
    /// Another API's tool definitions as chat's `tools`: `convert` turns each (given its index,
    /// for the error's field) into a function, or refuses it.
    pub fn convert_all<T>(
        tools: Option<Vec<T>>,
        convert: impl Fn(usize, T) -> Result<FunctionIn, ApiError>,
    ) -> Result<Option<Vec<ToolIn>>, ApiError> {
        tools
            .map(|tools| {
                tools
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| {
                        Ok(ToolIn {
                            kind: "function".into(),
                            function: convert(i, t)?,
                        })
                    })
                    .collect()
            })
            .transpose()
    }
}

impl FunctionIn {
    /// The argument schema (`{"type": "object"}` when none was given).
    pub fn parameters(&self) -> Value {
        self.parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}))
    }
}

/// What `tool_choice` allows.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    /// No calls: the tools are not shown to the model.
    None,
    /// The model decides.
    Auto,
    /// At least one call, constrained.
    Required,
    /// A call of this function, constrained.
    Named(String),
}

/// The tools of one chat request, validated.
#[derive(Debug)]
pub struct ToolPlan {
    /// The functions.
    pub functions: Vec<FunctionIn>,
    /// What the model may or must do.
    pub choice: ToolChoice,
    /// More than one call per answer allowed.
    pub parallel: bool,
    /// How calls are written, for this template.
    pub format: ToolFormat,
}

impl ToolPlan {
    /// The plan of `tools`, `tool_choice` and `parallel_tool_calls` (`None` when no tool is
    /// given, or `tool_choice` is `none`).
    pub fn new(
        tools: Option<&[ToolIn]>,
        tool_choice: Option<&Value>,
        parallel: Option<bool>,
        format: ToolFormat,
    ) -> Result<Option<Self>, ApiError> {
        let tools = tools.unwrap_or_default();
        let mut functions: Vec<FunctionIn> = Vec::with_capacity(tools.len());
        for (i, tool) in tools.iter().enumerate() {
            if tool.kind != "function" {
                return Err(ApiError::invalid(
                    format!("tools[{i}].type"),
                    format!(
                        "tool type {:?} is not supported; only \"function\" is",
                        tool.kind
                    ),
                ));
            }
            let f = &tool.function;
            let valid_name = !f.name.is_empty()
                && f.name.len() <= 64
                && f.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid_name {
                return Err(ApiError::invalid(
                    format!("tools[{i}].function.name"),
                    "a function name must be 1 to 64 letters, digits, `_` or `-`",
                ));
            }
            if functions.iter().any(|g| g.name == f.name) {
                return Err(ApiError::invalid(
                    format!("tools[{i}].function.name"),
                    format!("the function name {:?} is given twice", f.name),
                ));
            }
            if let Some(p) = &f.parameters
                && !p.is_object()
            {
                return Err(ApiError::invalid(
                    format!("tools[{i}].function.parameters"),
                    "`parameters` must be a JSON schema object",
                ));
            }
            functions.push(f.clone());
        }
        let choice = match tool_choice {
            None | Some(Value::Null) => ToolChoice::Auto,
            Some(Value::String(s)) => match s.as_str() {
                "none" => ToolChoice::None,
                "auto" => ToolChoice::Auto,
                "required" => ToolChoice::Required,
                other => {
                    return Err(ApiError::invalid(
                        "tool_choice",
                        format!(
                            "`tool_choice` {other:?} is not one of none, auto, required or a named function"
                        ),
                    ));
                }
            },
            Some(v) => {
                let name = v
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .filter(|_| v.get("type").and_then(Value::as_str) == Some("function"))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "tool_choice",
                            "a named `tool_choice` is {\"type\": \"function\", \"function\": {\"name\": ...}}",
                        )
                    })?;
                if !functions.iter().any(|f| f.name == name) {
                    return Err(ApiError::invalid(
                        "tool_choice",
                        format!("`tool_choice` names {name:?}, which is not among `tools`"),
                    ));
                }
                ToolChoice::Named(name.to_string())
            }
        };
        if functions.is_empty() {
            return match choice {
                ToolChoice::None | ToolChoice::Auto => Ok(None),
                _ => Err(ApiError::invalid(
                    "tool_choice",
                    "`tool_choice` asks for a call but `tools` is empty",
                )),
            };
        }
        if choice == ToolChoice::None {
            return Ok(None);
        }
        Ok(Some(Self {
            functions,
            choice,
            parallel: parallel.unwrap_or(true),
            format,
        }))
    }

    /// The functions the output may call: all, or the named one.
    pub fn callable(&self) -> impl Iterator<Item = &FunctionIn> {
        self.functions.iter().filter(|f| match &self.choice {
            ToolChoice::Named(name) => &f.name == name,
            _ => true,
        })
    }

    /// Whether the output must be a call (and is constrained to one).
    pub fn constrained(&self) -> bool {
        matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_))
    }

    /// `tools` as the template receives them.
    pub fn template_tools(&self) -> Value {
        Value::Array(
            self.functions
                .iter()
                .map(|f| json!({"type": "function", "function": f}))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(names: &[&str]) -> Vec<ToolIn> {
        names
            .iter()
            .map(|n| ToolIn {
                kind: "function".into(),
                function: FunctionIn {
                    name: n.to_string(),
                    description: None,
                    parameters: None,
                    strict: None,
                },
            })
            .collect()
    }

    #[test]
    fn tool_choice_is_read_as_openai_defines_it() {
        let t = tools(&["get_weather", "search"]);
        let plan =
            |choice: Value| ToolPlan::new(Some(&t), Some(&choice), None, ToolFormat::Generic);
        assert!(plan(json!("none")).unwrap().is_none());
        assert_eq!(
            plan(json!("auto")).unwrap().unwrap().choice,
            ToolChoice::Auto
        );
        // `parallel_tool_calls` left out: several calls allowed, as OpenAI's default.
        assert!(plan(json!("auto")).unwrap().unwrap().parallel);
        assert_eq!(
            plan(json!("required")).unwrap().unwrap().choice,
            ToolChoice::Required
        );
        let named = plan(json!({"type": "function", "function": {"name": "search"}}))
            .unwrap()
            .unwrap();
        assert_eq!(
            named
                .callable()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>(),
            ["search"]
        );
        for bad in [
            json!("sometimes"),
            json!({"type": "function", "function": {"name": "missing"}}),
            json!({"function": {"name": "search"}}),
        ] {
            let e = plan(bad.clone()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("tool_choice"), "{bad}");
        }
    }

    #[test]
    fn bad_tools_are_refused_naming_the_field() {
        let mut t = tools(&["a b"]);
        let e = ToolPlan::new(Some(&t), None, None, ToolFormat::Generic).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools[0].function.name"));
        t = tools(&["x", "x"]);
        let e = ToolPlan::new(Some(&t), None, None, ToolFormat::Generic).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools[1].function.name"));
        let e = ToolPlan::new(
            Some(&[]),
            Some(&json!("required")),
            None,
            ToolFormat::Generic,
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tool_choice"));
    }
}
