//! Tool calls that survive `max_tokens` on the default model: with `tool_choice` `required`
//! (Messages: `any`) and `max_tokens` 100, the answer holds at least one schema-valid call,
//! the same whole and streamed for the same seed; a model that repeats an identical call ends
//! its list there (the answer then holds each call once and is not cut by the limit).

mod json_schema_check;
mod support;

use serde_json::{Value, json};
use support::{Response, Server, config, default_model, weather_schema};

fn chat_body(seed: u64, stream: bool) -> Value {
    json!({
        "messages": [{"role": "user", "content": "What is the weather in Paris and in Oslo?"}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "The weather in a city.",
            "parameters": weather_schema()}}],
        "tool_choice": "required",
        "max_tokens": 100,
        "seed": seed,
        "stream": stream,
    })
}

fn streamed_calls(r: &Response) -> Vec<(String, String)> {
    assert_eq!(r.status, 200, "{}", r.text());
    let mut calls = Vec::new();
    for event in r.events() {
        if event == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&event).unwrap();
        for c in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let f = &c["function"];
            calls.push((
                f["name"].as_str().unwrap().to_string(),
                f["arguments"].as_str().unwrap().to_string(),
            ));
        }
    }
    calls
}

#[test]
fn required_calls_survive_the_token_limit_on_the_default_model() {
    let model = default_model().display().to_string();
    let mut config = config(&model, 1024);
    config.engine.sequences = 2;
    let s = Server::start(config);
    for seed in [1, 2, 3] {
        let (calls, finish) = s
            .post("/v1/chat/completions", &chat_body(seed, false))
            .tool_calls();
        assert!(!calls.is_empty(), "seed {seed}: no call");
        for (i, (name, arguments)) in calls.iter().enumerate() {
            assert_eq!(name, "get_weather");
            let arguments: Value = serde_json::from_str(arguments).unwrap();
            json_schema_check::check(&arguments, &weather_schema()).unwrap();
            assert!(
                !calls[..i]
                    .iter()
                    .any(|(_, a)| serde_json::from_str::<Value>(a).unwrap() == arguments),
                "seed {seed}: a call repeated: {calls:?}"
            );
        }
        assert!(
            ["tool_calls", "length"].contains(&finish.as_str()),
            "{finish}"
        );
        let streamed = streamed_calls(&s.post("/v1/chat/completions", &chat_body(seed, true)));
        assert_eq!(
            streamed, calls,
            "seed {seed}: streamed and whole calls differ"
        );
    }
    // Anthropic's `any` is the same constraint.
    let r = s.post(
        "/v1/messages",
        &json!({
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [{"name": "get_weather", "input_schema": weather_schema()}],
            "tool_choice": {"type": "any"},
            "seed": 1,
        }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    let uses: Vec<&Value> = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert!(!uses.is_empty(), "{body}");
    for u in uses {
        json_schema_check::check(&u["input"], &weather_schema()).unwrap();
    }
}
