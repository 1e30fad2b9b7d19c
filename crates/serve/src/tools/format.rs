//! How a model family writes tool calls, and the grammar that makes it write one.

use llguidance::api::TopLevelGrammar;
use rinfer_model::Tokenizer;
use rinfer_model::chat_template::ChatTemplate;
use rinfer_model::tokenizer::TokenType;
use serde_json::{Value, json};

use super::{ToolChoice, ToolPlan, deepseek, harmony};

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
    /// gpt-oss's harmony messages: `<|channel|>commentary to=functions.NAME <|constrain|>json
    /// <|message|>{...}` ([`super::harmony`]).
    Harmony,
    /// DeepSeek V3 and R1: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` and a fenced
    /// `json` block ([`super::deepseek`]).
    DeepSeekV3,
    /// DeepSeek V3.1: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}`.
    DeepSeekV31,
    /// rinfer's format for templates that know no tools:
    /// `{"tool_calls": [{"name": ..., "arguments": {...}}]}`.
    Generic,
}

impl ToolFormat {
    /// The format `template` writes: by the markup its source uses, when it reads `tools`.
    pub fn of_template(template: &ChatTemplate) -> Self {
        if template.source_contains("<|channel|>") {
            Self::Harmony
        } else if !template.takes_tools() {
            Self::Generic
        } else if template.source_contains(deepseek::CALL_BEGIN) {
            if template.source_contains("```json") {
                Self::DeepSeekV3
            } else {
                Self::DeepSeekV31
            }
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

    /// The markers of the format that the model's vocabulary may hold as control tokens, which
    /// the generated text must show for the answer to be read back.
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            Self::Harmony => harmony::MARKERS,
            Self::DeepSeekV3 | Self::DeepSeekV31 => deepseek::MARKERS,
            Self::Hermes => &["<tool_call>", "</tool_call>"],
            Self::Llama3 => &["<|python_tag|>"],
            Self::Mistral => &["[TOOL_CALLS]"],
            Self::Generic => &[],
        }
    }
}

/// `text` in a Lark grammar: the control token of that name when the vocabulary has one (a
/// model writes its markup as one token), else the text itself.
fn marker(tokenizer: &Tokenizer, text: &str) -> String {
    match tokenizer.token_id(text) {
        Some(id)
            if tokenizer.is_eog(id)
                || matches!(
                    tokenizer.token_type(id),
                    Some(TokenType::Control | TokenType::Unknown)
                ) =>
        {
            format!("<[{id}]>")
        }
        _ => lark_string(text),
    }
}

/// `text` as a Lark string literal.
fn lark_string(text: &str) -> String {
    Value::String(text.to_string()).to_string()
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
/// format, arguments valid against each function's schema. Markup is written as the control
/// tokens of `tokenizer` that spell it, where it has them. A format whose model reasons in its
/// own messages (harmony) may reason first when `reasoning` is allowed.
pub fn call_grammar(plan: &ToolPlan, reasoning: bool, tokenizer: &Tokenizer) -> TopLevelGrammar {
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
        ToolFormat::Harmony => harmony_grammar(plan, reasoning, tokenizer, &compact),
        ToolFormat::DeepSeekV3 | ToolFormat::DeepSeekV31 => {
            deepseek_grammar(plan, tokenizer, &compact)
        }
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

/// One rule per callable function, `call_I: PREFIX(NAME) %json {SCHEMA} SUFFIX`, and the rule
/// `call` choosing among them.
fn call_rules(
    plan: &ToolPlan,
    compact: &dyn Fn(Value) -> Value,
    prefix: impl Fn(&str) -> String,
    suffix: &str,
) -> String {
    let mut rules = String::new();
    let mut names = Vec::new();
    for (i, f) in plan.callable().enumerate() {
        let schema = compact(f.parameters());
        rules.push_str(&format!(
            "call_{i}: {} %json {schema} {suffix}\n",
            prefix(&f.name)
        ));
        names.push(format!("call_{i}"));
    }
    rules.push_str(&format!("call: {}\n", names.join(" | ")));
    rules
}

/// Harmony: one call in the commentary channel (the model's `<|call|>` ends the answer), after
/// at most one reasoning message when `reasoning` is allowed.
fn harmony_grammar(
    plan: &ToolPlan,
    reasoning: bool,
    tokenizer: &Tokenizer,
    compact: &dyn Fn(Value) -> Value,
) -> TopLevelGrammar {
    let m = |text: &str| marker(tokenizer, text);
    let (channel, message, constrain) = (m("<|channel|>"), m("<|message|>"), m("<|constrain|>"));
    let calls = call_rules(
        plan,
        compact,
        |name| {
            format!(
                "{channel} {} {constrain} {} {message}",
                lark_string(&format!("commentary to=functions.{name} ")),
                lark_string("json"),
            )
        },
        "",
    );
    let start = match reasoning {
        true => "reasoning? call",
        false => "call",
    };
    TopLevelGrammar::from_lark(format!(
        "start: {start}\n\
         reasoning: {channel} \"analysis\" {message} REASONING {} {} \"assistant\"\n\
         REASONING: /[^<]+/\n{calls}",
        m("<|end|>"),
        m("<|start|>"),
    ))
}

/// DeepSeek: the list of calls between its markers, each call in the V3 or V3.1 shape.
fn deepseek_grammar(
    plan: &ToolPlan,
    tokenizer: &Tokenizer,
    compact: &dyn Fn(Value) -> Value,
) -> TopLevelGrammar {
    let m = |text: &str| marker(tokenizer, text);
    let (begin, sep, end) = (
        m(deepseek::CALL_BEGIN),
        m(deepseek::SEP),
        m(deepseek::CALL_END),
    );
    let v3 = plan.format == ToolFormat::DeepSeekV3;
    let calls = call_rules(
        plan,
        compact,
        |name| match v3 {
            true => format!(
                "{begin} \"function\" {sep} {}",
                lark_string(&format!("{name}\n```json\n"))
            ),
            false => format!("{begin} {} {sep}", lark_string(name)),
        },
        &match v3 {
            true => format!("\"\\n```\" {end}"),
            false => end.clone(),
        },
    );
    let list = match plan.parallel {
        true => "call+",
        false => "call",
    };
    TopLevelGrammar::from_lark(format!(
        "start: {} {list} {}\n{calls}",
        m(deepseek::CALLS_BEGIN),
        m(deepseek::CALLS_END),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format_of(source: &str) -> ToolFormat {
        ToolFormat::of_template(&ChatTemplate::new(source, "", "").unwrap())
    }

    #[test]
    fn the_format_is_chosen_by_the_templates_markup() {
        let harmony =
            include_str!("../../../../tests/fixtures/chat_templates/gpt_oss_harmony.jinja");
        assert_eq!(format_of(harmony), ToolFormat::Harmony);
        let v3 = "{% for m in messages %}{% if tools %}{% endif %}{{ '<｜tool▁call▁begin｜>' + 'function<｜tool▁sep｜>' + m.content + '\\n```json\\n' }}{% endfor %}";
        assert_eq!(format_of(v3), ToolFormat::DeepSeekV3);
        let v31 = "{% for m in messages %}{% if tools %}{% endif %}{{ '<｜tool▁call▁begin｜>' + m.content + '<｜tool▁sep｜>' }}{% endfor %}";
        assert_eq!(format_of(v31), ToolFormat::DeepSeekV31);
        let qwen = include_str!("../../../../tests/fixtures/chat_templates/qwen2_5_tools.jinja");
        assert_eq!(format_of(qwen), ToolFormat::Hermes);
        assert_eq!(format_of("{{ messages[0].content }}"), ToolFormat::Generic);
    }
}
