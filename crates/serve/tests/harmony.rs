//! gpt-oss's harmony format on the server, end to end under every API: a gpt-oss model
//! whose vocabulary holds harmony's control tokens (`<|channel|>`, `<|message|>`, ...) and whose
//! template writes harmony, held to a call by `tool_choice`, answers with the call as
//! `tool_calls` / a `tool_use` block / a `function_call` item, and its reasoning (the analysis
//! channel, which the call grammar allows first unless the request turns reasoning off) as
//! `reasoning_content` / a `thinking` block / a reasoning item, whole and streamed alike; a
//! `grammar` holding it to an analysis and a final message gives reasoning and content. The
//! markup, written as control tokens, never shows.
//!
//! The model is the gpt-oss fixture (random weights, GPT-2 vocabulary) with seven tokens
//! renamed to harmony's markers as control tokens (the merges that made them dropped) and the
//! harmony template as its own: written once per test into a temporary folder.

mod json_schema_check;
mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rinfer_formats::gguf::{GgufFile, GgufWriter, MetadataValue, ValueType};
use serde_json::{Value, json};
use support::{Response, Server, config, weather_schema};

/// The harmony markers and the ids they take in the fixture's vocabulary.
const MARKERS: &[(&str, u32)] = &[
    ("<|start|>", 1993),
    ("<|channel|>", 1994),
    ("<|message|>", 1995),
    ("<|end|>", 1996),
    ("<|return|>", 1997),
    ("<|call|>", 1998),
    ("<|constrain|>", 1999),
];

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

fn strings(items: Vec<String>) -> MetadataValue {
    MetadataValue::Array {
        element: ValueType::String,
        items: items.into_iter().map(MetadataValue::String).collect(),
    }
}

/// The gpt-oss fixture with harmony's control tokens and template, written to `path`.
fn write_harmony_model(path: &Path) {
    let file = GgufFile::open(fixture("models/gpt-oss-tiny-mxfp4.gguf")).unwrap();
    let meta = file.metadata();
    let texts = |key: &str| -> Vec<String> {
        meta.get(key)
            .and_then(|v| v.as_array())
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    let mut tokens = texts("tokenizer.ggml.tokens");
    let renamed: Vec<String> = MARKERS
        .iter()
        .map(|&(_, id)| tokens[id as usize].clone())
        .collect();
    for &(marker, id) in MARKERS {
        tokens[id as usize] = marker.to_string();
    }
    // A merge that makes or uses a renamed token would name a token the vocabulary lacks.
    let merges: Vec<String> = texts("tokenizer.ggml.merges")
        .into_iter()
        .filter(|m| {
            let (a, b) = m.split_once(' ').unwrap();
            let made = format!("{a}{b}");
            !renamed.iter().any(|r| r == a || r == b || *r == made)
        })
        .collect();
    let mut writer = GgufWriter::new();
    for (key, value) in meta.iter() {
        let value = match key {
            "tokenizer.ggml.tokens" => strings(tokens.clone()),
            "tokenizer.ggml.merges" => strings(merges.clone()),
            "tokenizer.ggml.token_type" => {
                let MetadataValue::Array { element, items } = value.clone() else {
                    panic!("token types are an array");
                };
                let mut items = items;
                for &(_, id) in MARKERS {
                    items[id as usize] = MetadataValue::I32(3);
                }
                MetadataValue::Array { element, items }
            }
            _ => value.clone(),
        };
        writer.add_metadata(key, value).unwrap();
    }
    let template =
        std::fs::read_to_string(fixture("chat_templates/gpt_oss_harmony.jinja")).unwrap();
    writer
        .add_metadata("tokenizer.chat_template", MetadataValue::String(template))
        .unwrap();
    for t in file.tensors() {
        writer
            .add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())
            .unwrap();
    }
    writer.write_file(path).unwrap();
}

fn harmony_model() -> &'static Path {
    static MODEL: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &MODEL
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("gpt-oss-harmony-tiny.gguf");
            write_harmony_model(&path);
            (dir, path)
        })
        .1
}

fn server() -> Server {
    let model = harmony_model().display().to_string();
    let mut config = config(&model, 2048);
    config.engine.threads = Some(2);
    Server::start(config)
}

const QUESTION: &str = "What is the weather in Paris?";
const SEED: u64 = 3;
const MAX_TOKENS: u64 = 400;

/// No harmony markup anywhere in `text` (an answer's body, or its events).
fn assert_no_markup(text: &str) {
    for (marker, _) in MARKERS {
        assert!(!text.contains(marker), "{marker} shows in {text}");
    }
}

fn assert_weather_call(name: &str, arguments: &Value) {
    assert_eq!(name, "get_weather");
    json_schema_check::check(arguments, &weather_schema()).unwrap();
}

/// Asserts that `r` is a 200 whose body holds no harmony markup.
fn assert_ok_without_markup(r: &Response) {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_no_markup(&r.text());
}

/// The JSON answer of `r`, a 200 without markup.
fn answer_of(r: &Response) -> Value {
    assert_ok_without_markup(r);
    r.json()
}

fn events(r: &Response) -> Vec<Value> {
    assert_ok_without_markup(r);
    // Each event's `data:` line (Messages and Responses name their events first).
    r.text()
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[test]
fn chat_completions_give_harmony_reasoning_and_calls() {
    let s = server();
    // The random weights would reason until the limit: a bias on `<|end|>` ends the reasoning
    // as soon as the grammar allows it, and the call follows.
    let end = MARKERS.iter().find(|(m, _)| *m == "<|end|>").unwrap().1;
    let body = |stream: bool| {
        json!({
            "messages": [{"role": "user", "content": QUESTION}],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "description": "The weather in a city.",
                "parameters": weather_schema()}}],
            "tool_choice": "required",
            "logit_bias": {end.to_string(): 100},
            "max_tokens": MAX_TOKENS,
            "seed": SEED,
            "stream": stream,
        })
    };
    let answer = answer_of(&s.post("/v1/chat/completions", &body(false)));
    let message = &answer["choices"][0]["message"];
    assert_eq!(
        answer["choices"][0]["finish_reason"], "tool_calls",
        "{answer}"
    );
    let call = &message["tool_calls"][0]["function"];
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_weather_call(call["name"].as_str().unwrap(), &arguments);
    let reasoning = message["reasoning_content"].as_str().unwrap();
    assert!(!reasoning.is_empty(), "{answer}");

    let (mut streamed_reasoning, mut name, mut streamed_arguments) =
        (String::new(), String::new(), String::new());
    for chunk in events(&s.post("/v1/chat/completions", &body(true))) {
        let delta = &chunk["choices"][0]["delta"];
        streamed_reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or_default());
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            name.push_str(call["function"]["name"].as_str().unwrap_or_default());
            streamed_arguments.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    assert_eq!(streamed_reasoning, reasoning);
    assert_eq!(name, "get_weather");
    assert_eq!(streamed_arguments, call["arguments"].as_str().unwrap());

    // A grammar holds the model to reasoning, then a final answer.
    let r = s.post(
        "/v1/chat/completions",
        &json!({
            "messages": [{"role": "user", "content": "Hi"}],
            "grammar": "start: <|channel|> \"analysis\" <|message|> /[a-z ]{1,24}/ <|end|> \
                        <|start|> \"assistant\" <|channel|> \"final\" <|message|> /[a-z ]{1,24}/",
            "max_tokens": 200,
            "seed": SEED,
        }),
    );
    let message = &answer_of(&r)["choices"][0]["message"];
    assert!(
        !message["reasoning_content"].as_str().unwrap().is_empty(),
        "{message}"
    );
    assert!(
        !message["content"].as_str().unwrap().is_empty(),
        "{message}"
    );
}

#[test]
fn anthropic_messages_give_thinking_and_tool_use_blocks() {
    let s = server();
    let body = |thinking: &str, stream: bool| {
        json!({
            "messages": [{"role": "user", "content": QUESTION}],
            "tools": [{"name": "get_weather", "description": "The weather in a city.",
                       "input_schema": weather_schema()}],
            "tool_choice": {"type": "any"},
            "thinking": {"type": thinking},
            "max_tokens": MAX_TOKENS,
            "seed": SEED,
            "stream": stream,
        })
    };
    // Thinking disabled: the call comes at once.
    let answer = answer_of(&s.post("/v1/messages", &body("disabled", false)));
    assert_eq!(answer["stop_reason"], "tool_use", "{answer}");
    let blocks = answer["content"].as_array().unwrap();
    let tool_use = blocks.iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_weather_call(tool_use["name"].as_str().unwrap(), &tool_use["input"]);
    let mut input = String::new();
    for event in events(&s.post("/v1/messages", &body("disabled", true))) {
        input.push_str(event["delta"]["partial_json"].as_str().unwrap_or_default());
    }
    let input: Value = serde_json::from_str(&input).unwrap();
    assert_eq!(input, tool_use["input"]);

    // Thinking enabled: the random weights reason (until the limit), as a thinking block.
    let answer = answer_of(&s.post("/v1/messages", &body("enabled", false)));
    let thinking = answer["content"][0]["thinking"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!thinking.is_empty(), "{answer}");
    let mut streamed = String::new();
    for event in events(&s.post("/v1/messages", &body("enabled", true))) {
        streamed.push_str(event["delta"]["thinking"].as_str().unwrap_or_default());
    }
    assert_eq!(streamed, thinking);
}

#[test]
fn responses_give_reasoning_and_function_call_items() {
    let s = server();
    let body = |effort: &str, stream: bool| {
        json!({
            "input": QUESTION,
            "tools": [{"type": "function", "name": "get_weather",
                       "description": "The weather in a city.", "parameters": weather_schema()}],
            "tool_choice": "required",
            "reasoning": {"effort": effort},
            "max_output_tokens": MAX_TOKENS,
            "seed": SEED,
            "stream": stream,
        })
    };
    // No reasoning: the call comes at once.
    let answer = answer_of(&s.post("/v1/responses", &body("none", false)));
    let items = answer["output"].as_array().unwrap();
    let call = items
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("{answer}"));
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_weather_call(call["name"].as_str().unwrap(), &arguments);
    let mut streamed_arguments = String::new();
    for event in events(&s.post("/v1/responses", &body("none", true))) {
        if event["type"] == "response.function_call_arguments.done" {
            streamed_arguments = event["arguments"].as_str().unwrap().to_string();
        }
    }
    assert_eq!(streamed_arguments, call["arguments"].as_str().unwrap());

    // Reasoning allowed: the random weights reason (until the limit), as a reasoning item.
    let answer = answer_of(&s.post("/v1/responses", &body("high", false)));
    let reasoning = answer["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(!reasoning["content"][0]["text"].as_str().unwrap().is_empty());
    let mut streamed = String::new();
    for event in events(&s.post("/v1/responses", &body("high", true))) {
        if event["type"] == "response.reasoning_text.delta" {
            streamed.push_str(event["delta"].as_str().unwrap());
        }
    }
    assert_eq!(streamed, reasoning["content"][0]["text"].as_str().unwrap());
}
