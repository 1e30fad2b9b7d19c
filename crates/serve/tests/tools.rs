//! Tool calls on the server, on tiny fixture models whose random weights would never call
//! a tool by themselves: with `tool_choice` `required` or a named function, the answer is a
//! call whose arguments follow the function's schema, whole and streamed, in the generic
//! format (a template without tools), Qwen's `<tool_call>` blocks and Llama 3's JSON (their
//! templates as fixtures); histories with calls and results render; misuse is a 400.

mod json_schema_check;
mod support;

use serde_json::{Value, json};
use support::{Response, Server, config, fixture, weather_schema};

fn server(model: &str, template: Option<&str>) -> Server {
    let mut config = config(&fixture(model), 1024);
    config.engine.threads = Some(2);
    config.chat_template = template.map(fixture);
    Server::start(config)
}

fn time_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}},
        "required": ["zone"],
        "additionalProperties": false
    })
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {
            "name": "get_weather", "description": "The weather in a city.",
            "parameters": weather_schema()}},
        {"type": "function", "function": {
            "name": "get_time", "description": "The time in a zone.",
            "parameters": time_schema()}}
    ])
}

fn request(choice: Value, parallel: bool, stream: bool) -> Value {
    json!({
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": tools(),
        "tool_choice": choice,
        "parallel_tool_calls": parallel,
        "max_tokens": 200,
        "temperature": 1.0,
        "seed": 7,
        "stream": stream,
    })
}

/// The calls of a chat answer (whole or streamed), with its finish reason.
fn calls_of(r: &Response, stream: bool) -> (Vec<(String, String)>, String) {
    assert_eq!(r.status, 200, "{}", r.text());
    if !stream {
        return r.tool_calls();
    }
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut finish = String::new();
    for event in r.events() {
        if event == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&event).unwrap();
        let choice = &chunk["choices"][0];
        for delta in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = delta["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                calls.push(Default::default());
            }
            let f = &delta["function"];
            calls[index].0.push_str(f["name"].as_str().unwrap_or(""));
            calls[index]
                .1
                .push_str(f["arguments"].as_str().unwrap_or(""));
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (calls, finish)
}

fn check_calls(calls: &[(String, String)], only: Option<&str>, parallel: bool) {
    assert!(!calls.is_empty());
    if !parallel {
        assert_eq!(calls.len(), 1, "{calls:?}");
    }
    for (name, arguments) in calls {
        if let Some(only) = only {
            assert_eq!(name, only);
        }
        let schema = match name.as_str() {
            "get_weather" => weather_schema(),
            "get_time" => time_schema(),
            other => panic!("called {other}"),
        };
        let value: Value = serde_json::from_str(arguments)
            .unwrap_or_else(|e| panic!("{name} arguments {arguments:?}: {e}"));
        json_schema_check::check(&value, &schema).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// `required` and named choices, whole and streamed, parallel or not, on one server.
fn constrained_calls_follow_the_schemas(s: &Server) {
    let named = json!({"type": "function", "function": {"name": "get_time"}});
    for stream in [false, true] {
        for (choice, only) in [(json!("required"), None), (named.clone(), Some("get_time"))] {
            for parallel in [false, true] {
                let r = s.post(
                    "/v1/chat/completions",
                    &request(choice.clone(), parallel, stream),
                );
                let (calls, finish) = calls_of(&r, stream);
                // With parallel calls allowed, a random-weight model may go on calling until
                // `max_tokens` cuts it (`length`); every call it completed still validates.
                if !(parallel && finish == "length") {
                    assert_eq!(finish, "tool_calls", "{}", r.text());
                }
                check_calls(&calls, only, parallel);
            }
        }
    }
}

/// A conversation that called a tool and got its result renders and answers.
fn histories_with_calls_and_results_render(s: &Server) {
    let body = json!({
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"},
        ],
        "tools": tools(),
        "max_tokens": 4,
    });
    let r = s.post("/v1/chat/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn the_generic_format_on_a_template_without_tools() {
    let s = server("models/gemma3-tiny-q4_k_m.gguf", None);
    constrained_calls_follow_the_schemas(&s);
    histories_with_calls_and_results_render(&s);
    // `auto`: the model decides; the answer is either text or calls, never an error.
    let r = s.post("/v1/chat/completions", &request(json!("auto"), true, false));
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn qwen_tool_call_blocks() {
    let s = server(
        "models/qwen2-tiny-q4_k_m.gguf",
        Some("chat_templates/qwen2_5_tools.jinja"),
    );
    constrained_calls_follow_the_schemas(&s);
    histories_with_calls_and_results_render(&s);
}

#[test]
fn llama3_json_calls() {
    let s = server(
        "models/llama-tiny-q4_k.gguf",
        Some("chat_templates/llama3_1_tools.jinja"),
    );
    // Llama 3's template shows one call per answer.
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    for stream in [false, true] {
        for (choice, only) in [
            (json!("required"), None),
            (named.clone(), Some("get_weather")),
        ] {
            let r = s.post("/v1/chat/completions", &request(choice, false, stream));
            let (calls, finish) = calls_of(&r, stream);
            assert_eq!(finish, "tool_calls", "{}", r.text());
            check_calls(&calls, only, false);
        }
    }
    histories_with_calls_and_results_render(&s);
}

#[test]
fn tool_misuse_is_a_400_naming_the_field() {
    let s = server("models/gemma3-tiny-q4_k_m.gguf", None);
    let mut cases = vec![
        (
            json!({"prompt": "x", "tools": tools()}),
            "/v1/completions",
            "tools",
        ),
        (
            json!({"messages": [{"role": "tool", "content": "18"}], "tools": tools()}),
            "/v1/chat/completions",
            "messages[0].tool_call_id",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": tools(),
                   "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "/v1/chat/completions",
            "tool_choice",
        ),
    ];
    let mut both = request(json!("required"), true, false);
    both["response_format"] = json!({"type": "json_object"});
    cases.push((both, "/v1/chat/completions", "response_format"));
    for (body, path, param) in cases {
        let r = s.post(path, &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(r.error_param().as_deref(), Some(param), "{body}");
    }
}

#[test]
fn streamed_chat_keeps_every_token_logprob_and_the_whole_text() {
    let s = server("models/gemma3-tiny-q4_k_m.gguf", None);
    let body = json!({
        "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": 12,
        "temperature": 0,
        "logprobs": true,
        "top_logprobs": 2,
    });
    let whole = s.post("/v1/chat/completions", &body).json();
    let mut streamed_body = body.clone();
    streamed_body["stream"] = json!(true);
    streamed_body["stream_options"] = json!({"include_usage": true});
    let r = s.post("/v1/chat/completions", &streamed_body);
    let (mut text, mut entries, mut usage) = (String::new(), 0, 0);
    for event in r.events() {
        if event == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&event).unwrap();
        if let Some(n) = chunk["usage"]["completion_tokens"].as_u64() {
            usage = n;
        }
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
        entries += choice["logprobs"]["content"].as_array().map_or(0, Vec::len);
    }
    assert_eq!(text, whole["choices"][0]["message"]["content"]);
    assert_eq!(entries as u64, usage);
    assert_eq!(usage, whole["usage"]["completion_tokens"]);
}
