//! How a model family writes tool calls, and the grammar that makes it write one.

use llguidance::api::TopLevelGrammar;
use rinfer_model::chat_template::ChatTemplate;
use serde_json::{Value, json};

use super::{ToolChoice, ToolPlan};

/// A model family's tool-call format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    /// Hermes and Qwen: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block
    /// per call.
    Hermes,
    /// Llama 3.1 and later: `{"name": ..., "parameters": {...}}` (after `<|python_tag|>`).
    Llama3,
    /// Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`.
    Mistral,
    /// rinfer's format for templates that know no tools:
    /// `{"tool_calls": [{"name": ..., "arguments": {...}}]}`.
    Generic,
}

impl ToolFormat {
    /// The format `template` writes: by the markup its source uses, when it reads `tools`.
    pub fn of_template(template: &ChatTemplate) -> Self {
        if !template.takes_tools() {
            Self::Generic
        } else if template.source_contains("<tool_call>") {
            Self::Hermes
        } else if template.source_contains("[TOOL_CALLS]") {
            Self::Mistral
        } else if template.source_contains("<|python_tag|>")
            || template.source_contains("<|eom_id|>")
            || template.source_contains("ipython")
        {
            Self::Llama3
        } else {
            // A template that reads `tools` in a way we do not recognise: Hermes's blocks are
            // the most common, and every format is tried when parsing anyway.
            Self::Hermes
        }
    }

    /// Whether the template itself shows the tools to the model.
    pub fn template_renders_tools(self) -> bool {
        self != Self::Generic
    }
}

/// The system text of the generic format: the functions, and how to call them.
pub fn generic_instructions(plan: &ToolPlan) -> String {
    let mut text = String::from("You can call these functions:\n");
    for f in plan.callable() {
        let entry = json!({
            "name": f.name,
            "description": f.description,
            "parameters": f.parameters(),
        });
        text.push_str(&entry.to_string());
        text.push('\n');
    }
    text.push_str(
        "To call functions, reply with only this JSON and nothing else: \
         {\"tool_calls\": [{\"name\": \"<function name>\", \"arguments\": {<the arguments>}}]}\n",
    );
    match &plan.choice {
        ToolChoice::Required => text.push_str("You must call at least one function."),
        ToolChoice::Named(name) => text.push_str(&format!("You must call `{name}`.")),
        _ => text.push_str("If no function is needed, answer normally."),
    }
    text
}

/// The grammar a `required` or named `tool_choice` holds the output to: calls in the plan's
/// format, arguments valid against each function's schema.
pub fn call_grammar(plan: &ToolPlan) -> TopLevelGrammar {
    let arguments_key = match plan.format {
        ToolFormat::Llama3 => "parameters",
        _ => "arguments",
    };
    let calls: Vec<Value> = plan
        .callable()
        .map(|f| {
            json!({
                "type": "object",
                "properties": {
                    "name": {"const": f.name},
                    arguments_key: f.parameters(),
                },
                "required": ["name", arguments_key],
                "additionalProperties": false,
            })
        })
        .collect();
    let call = json!({"anyOf": calls});
    let list = |call: &Value| {
        let mut list = json!({"type": "array", "items": call, "minItems": 1});
        if !plan.parallel {
            list["maxItems"] = json!(1);
        }
        list
    };
    let compact = |mut schema: Value| {
        schema["x-guidance"] = json!({"whitespace_flexible": false, "lenient": true});
        schema
    };
    match plan.format {
        ToolFormat::Generic => TopLevelGrammar::from_json_schema(compact(json!({
            "type": "object",
            "properties": {"tool_calls": list(&call)},
            "required": ["tool_calls"],
            "additionalProperties": false,
        }))),
        ToolFormat::Mistral => TopLevelGrammar::from_json_schema(compact(list(&call))),
        ToolFormat::Llama3 => TopLevelGrammar::from_json_schema(compact(call)),
        ToolFormat::Hermes => {
            let block = "\"<tool_call>\\n\" call \"\\n</tool_call>\"";
            let start = if plan.parallel {
                format!("start: {block} (\"\\n\" {block})*")
            } else {
                format!("start: {block}")
            };
            TopLevelGrammar::from_lark(format!("{start}\ncall: %json {}\n", compact(call)))
        }
    }
}
