//! The harmony and DeepSeek readers against transcripts of what those models write: whole,
//! streamed in pieces of every size (markers split across pieces), cut short by `max_tokens`
//! at every byte, and malformed. The markup never reaches reasoning or content.

use std::sync::Arc;

use serde_json::{Value, json};

use super::output::{ChatOutput, Markup, joined};
use super::{ToolCall, ToolFormat};

const GPT_OSS_FINAL: &str =
    include_str!("../../../../tests/fixtures/tool_transcripts/gpt_oss_final.txt");
const GPT_OSS_CALL: &str =
    include_str!("../../../../tests/fixtures/tool_transcripts/gpt_oss_call.txt");
const GPT_OSS_RECIPIENT_FIRST: &str =
    include_str!("../../../../tests/fixtures/tool_transcripts/gpt_oss_call_recipient_first.txt");
const DEEPSEEK_V3: &str =
    include_str!("../../../../tests/fixtures/tool_transcripts/deepseek_v3.txt");
const DEEPSEEK_V3_1: &str =
    include_str!("../../../../tests/fixtures/tool_transcripts/deepseek_v3_1.txt");
const DEEPSEEK_R1_OPEN: &str =
    include_str!("../../../../tests/fixtures/tool_transcripts/deepseek_r1_open_think.txt");

/// Harmony's markup (control tokens), which never reaches the client as text.
const MARKUP: &[&str] = &["<|", "|>", "<｜", "｜>"];

fn output(tools: Option<ToolFormat>, markup: Markup) -> ChatOutput {
    ChatOutput {
        tools,
        declared: Arc::from(["get_weather".to_string(), "get_time".to_string()]),
        markup,
    }
}

fn harmony(tools: bool) -> ChatOutput {
    output(tools.then_some(ToolFormat::Harmony), Markup::Harmony)
}

/// `(reasoning, content, calls)` of `text` streamed in pieces of `n` characters.
fn streamed(output: &ChatOutput, text: &str, n: usize) -> (Option<String>, String, Vec<ToolCall>) {
    let mut shaper = output.stream();
    let chars: Vec<char> = text.chars().collect();
    let mut deltas = Vec::new();
    for piece in chars.chunks(n) {
        deltas.extend(shaper.push(&piece.iter().collect::<String>()));
    }
    let (rest, called) = shaper.finish();
    deltas.extend(rest);
    let (reasoning, content, calls) = joined(deltas);
    assert_eq!(called, !calls.is_empty());
    (reasoning, content, calls)
}

/// Reads `text` whole and streamed in pieces of every size up to 12 (and whole), checks that
/// they agree and that no markup shows, and returns the whole reading.
fn read_all_ways(output: &ChatOutput, text: &str) -> (Option<String>, String, Vec<ToolCall>) {
    let whole = output.read(text);
    for n in (1..=12).chain([text.len().max(1)]) {
        let (reasoning, content, calls) = streamed(output, text, n);
        match output.markup {
            // A `<think>` answer trims its reasoning whole, not streamed.
            Markup::Harmony => assert_eq!(reasoning, whole.0, "reasoning, pieces of {n}"),
            _ => assert_eq!(
                reasoning.as_deref().map(str::trim),
                whole.0.as_deref(),
                "pieces of {n}"
            ),
        }
        assert_eq!(content.trim(), whole.1.trim(), "content, pieces of {n}");
        assert_eq!(calls, whole.2, "calls, pieces of {n}");
    }
    for m in MARKUP.iter().filter(|_| output.markup == Markup::Harmony) {
        assert!(!whole.1.contains(m), "markup {m} in content {:?}", whole.1);
        let reasoning = whole.0.as_deref().unwrap_or("");
        assert!(
            !reasoning.contains(m),
            "markup {m} in reasoning {reasoning:?}"
        );
    }
    whole
}

fn arguments(call: &ToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap()
}

#[test]
fn harmony_analysis_is_reasoning_and_final_is_content() {
    for tools in [false, true] {
        let (reasoning, content, calls) = read_all_ways(&harmony(tools), GPT_OSS_FINAL);
        assert_eq!(
            reasoning.as_deref(),
            Some("The user greets me and asks nothing specific. Reply briefly and offer help.")
        );
        assert_eq!(content, "Hello! How can I help you today?");
        assert!(calls.is_empty());
    }
}

#[test]
fn harmony_commentary_to_a_function_is_a_call() {
    let (reasoning, content, calls) = read_all_ways(&harmony(true), GPT_OSS_CALL);
    assert!(reasoning.unwrap().starts_with("User asks:"));
    assert_eq!(content, "Let me check the forecast.");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(arguments(&calls[0]), json!({"city": "Paris", "days": 3}));
    let (message, called) = harmony(true).message(GPT_OSS_CALL);
    assert!(called);
    assert_eq!(message["tool_calls"][0]["function"]["name"], "get_weather");

    // The recipient may also come before the channel.
    let (reasoning, content, calls) = read_all_ways(&harmony(true), GPT_OSS_RECIPIENT_FIRST);
    assert_eq!(
        reasoning.as_deref(),
        Some("Need the time in Tokyo; use get_time.")
    );
    assert_eq!(content, "");
    assert_eq!(calls[0].name, "get_time");
    assert_eq!(arguments(&calls[0]), json!({"zone": 9}));
}

#[test]
fn harmony_calls_without_tools_or_of_undeclared_functions_are_content() {
    let (_, content, calls) = read_all_ways(&harmony(false), GPT_OSS_CALL);
    assert!(calls.is_empty());
    assert_eq!(
        content,
        "Let me check the forecast.\n{\"city\":\"Paris\",\"days\":3}"
    );
    let only_time = ChatOutput {
        declared: Arc::from(["get_time".to_string()]),
        ..harmony(true)
    };
    let (_, content, calls) = read_all_ways(&only_time, GPT_OSS_CALL);
    assert!(calls.is_empty());
    assert!(
        content.ends_with("{\"city\":\"Paris\",\"days\":3}"),
        "{content}"
    );
}

#[test]
fn harmony_cut_at_any_byte_keeps_markup_out_and_whole_calls_in() {
    let output = harmony(true);
    for (at, _) in GPT_OSS_CALL.char_indices() {
        let cut = &GPT_OSS_CALL[..at];
        let (_, _, calls) = read_all_ways(&output, cut);
        // Cut inside the arguments: no call, never half of one.
        assert!(
            calls.is_empty() || at > GPT_OSS_CALL.rfind('}').unwrap(),
            "{cut}"
        );
    }
    let cut = GPT_OSS_CALL.split("{\"city\"").next().unwrap().to_string() + "{\"city\":\"Pa";
    let (_, content, calls) = read_all_ways(&output, &cut);
    assert!(calls.is_empty());
    assert_eq!(content, "Let me check the forecast.\n{\"city\":\"Pa");
}

#[test]
fn malformed_or_foreign_harmony_is_content() {
    let output = harmony(true);
    let (_, content, calls) = read_all_ways(
        &output,
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{city: Paris}<|call|>",
    );
    assert!(calls.is_empty());
    assert_eq!(content, "{city: Paris}");
    let (_, content, calls) = read_all_ways(
        &output,
        "<|channel|>analysis<|message|>search<|end|><|start|>assistant<|channel|>commentary to=browser.search <|constrain|>json<|message|>{\"query\":\"x\"}<|call|>",
    );
    assert!(calls.is_empty());
    assert_eq!(content, "{\"query\":\"x\"}");
    // A model that writes no harmony at all: its text is the content.
    let (reasoning, content, _) = read_all_ways(&output, "Plain <b>text</b> and a < sign.");
    assert_eq!(
        (reasoning, content.as_str()),
        (None, "Plain <b>text</b> and a < sign.")
    );
    // Several reasoning messages are one reasoning, a line apart.
    let (reasoning, content, _) = read_all_ways(
        &output,
        "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|><|start|>assistant<|channel|>final<|message|>done",
    );
    assert_eq!(reasoning.as_deref(), Some("one\ntwo"));
    assert_eq!(content, "done");
}

#[test]
fn deepseek_v3_calls_become_calls() {
    let output = output(Some(ToolFormat::DeepSeekV3), Markup::Think);
    let (reasoning, content, calls) = read_all_ways(&output, DEEPSEEK_V3);
    assert_eq!(reasoning, None);
    assert_eq!(content, "I will look up the weather and the time.");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(arguments(&calls[0]), json!({"city": "Paris", "days": 3}));
    assert_eq!(calls[1].name, "get_time");
    assert_eq!(arguments(&calls[1]), json!({"zone": 1}));
}

#[test]
fn deepseek_v3_1_calls_become_calls() {
    let output = output(Some(ToolFormat::DeepSeekV31), Markup::Think);
    let (_, content, calls) = read_all_ways(&output, DEEPSEEK_V3_1);
    assert_eq!(content, "");
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.name.as_str(), arguments(c)))
            .collect::<Vec<_>>(),
        [
            ("get_weather", json!({"city": "Paris", "days": 3})),
            ("get_time", json!({"zone": 1}))
        ]
    );
}

#[test]
fn deepseek_r1_reasoning_opened_by_the_prompt_then_a_call() {
    let output = output(Some(ToolFormat::DeepSeekV3), Markup::ThinkOpen);
    let (reasoning, content, calls) = read_all_ways(&output, DEEPSEEK_R1_OPEN);
    assert_eq!(
        reasoning.as_deref(),
        Some("The user wants the weather in Paris. I should call get_weather.")
    );
    assert_eq!(content, "");
    assert_eq!(calls.len(), 1);
    assert_eq!(arguments(&calls[0]), json!({"city": "Paris", "days": 3}));
}

#[test]
fn deepseek_cut_short_keeps_the_whole_calls() {
    let output = output(Some(ToolFormat::DeepSeekV3), Markup::Think);
    let second = DEEPSEEK_V3
        .find("\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time")
        .unwrap();
    for (at, _) in DEEPSEEK_V3.char_indices().filter(|&(at, _)| at > second) {
        let (_, content, calls) = read_all_ways(&output, &DEEPSEEK_V3[..at]);
        assert_eq!(calls[0].name, "get_weather", "cut at {at}");
        assert!(
            calls.len() == 1 || at >= DEEPSEEK_V3.rfind('`').unwrap(),
            "cut at {at}"
        );
        assert!(content.starts_with("I will look up"), "cut at {at}");
    }
    // Cut before any whole call, or malformed: all content.
    for text in [
        &DEEPSEEK_V3[..DEEPSEEK_V3.find("{\"city\"").unwrap() + 5],
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{nope}\n```<｜tool▁call▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>rm_rf<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
    ] {
        let (_, _, calls) = read_all_ways(&output, text);
        assert!(calls.is_empty(), "{text}");
        assert_eq!(output.read(text).1.trim(), text.trim());
    }
}
