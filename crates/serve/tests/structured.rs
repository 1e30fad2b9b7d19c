//! Structured output (`response_format`) on the server, on a tiny fixture model whose
//! random weights would never write JSON by themselves: whatever the model prefers, the
//! constrained output parses and follows the schema, on chat and completions, streamed and
//! not; when `max_tokens` cuts it, `finish_reason` is `length` and the text is a prefix the
//! schema allows; a schema that cannot be compiled is a 400 that says why.

mod json_schema_check;
mod support;

use serde_json::{Value, json};
use support::{Server, tiny_server};

fn server() -> Server {
    tiny_server(|c| c.engine.sequences = 4)
}

/// Schemas over nested objects, arrays, enums, bounded numbers and optional fields, every
/// string and array bounded so that a random model finishes within the token budget.
fn schemas() -> Vec<(&'static str, Value)> {
    vec![
        (
            "person",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 8},
                    "age": {"type": "integer", "minimum": 0, "maximum": 120},
                    "email": {"type": "string", "maxLength": 10}
                },
                "required": ["name", "age"],
                "additionalProperties": false
            }),
        ),
        (
            "nested",
            json!({
                "type": "object",
                "properties": {
                    "address": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string", "maxLength": 6},
                            "floor": {"type": "integer", "minimum": -2, "maximum": 40}
                        },
                        "required": ["city", "floor"],
                        "additionalProperties": false
                    },
                    "tags": {
                        "type": "array",
                        "items": {"enum": ["red", "green", "blue"]},
                        "maxItems": 3
                    }
                },
                "required": ["address", "tags"],
                "additionalProperties": false
            }),
        ),
        (
            "enums",
            json!({
                "type": "object",
                "properties": {
                    "mood": {"enum": ["happy", "sad", "calm"]},
                    "ok": {"type": "boolean"},
                    "level": {"const": 3}
                },
                "required": ["mood", "ok", "level"],
                "additionalProperties": false
            }),
        ),
        (
            "list",
            json!({
                "type": "array",
                "items": {"$ref": "#/$defs/task"},
                "minItems": 1,
                "maxItems": 2,
                "$defs": {
                    "task": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer", "minimum": 1, "maximum": 99},
                            "done": {"type": "boolean"}
                        },
                        "required": ["id", "done"],
                        "additionalProperties": false
                    }
                }
            }),
        ),
    ]
}

fn json_schema_format(name: &str, schema: &Value) -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {"name": name, "schema": schema, "strict": true}
    })
}

/// The content of a chat answer or the text of a completion.
fn text_of(body: &Value) -> String {
    let choice = &body["choices"][0];
    choice["message"]["content"]
        .as_str()
        .or(choice["text"].as_str())
        .unwrap_or_else(|| panic!("no text in {body}"))
        .to_string()
}

#[test]
fn every_constrained_output_parses_and_follows_its_schema() {
    let s = server();
    let mut checked = 0;
    for (name, schema) in schemas() {
        for seed in 0..4 {
            let (path, mut body) = if seed % 2 == 0 {
                (
                    "/v1/chat/completions",
                    json!({"messages": [{"role": "user", "content": "Answer in JSON."}]}),
                )
            } else {
                ("/v1/completions", json!({"prompt": "JSON:"}))
            };
            body["response_format"] = json_schema_format(name, &schema);
            body["max_tokens"] = json!(160);
            body["temperature"] = json!(1.0);
            body["seed"] = json!(seed);
            let r = s.post(path, &body);
            assert_eq!(r.status, 200, "{name} {path}: {}", r.text());
            let answer = r.json();
            let text = text_of(&answer);
            assert_eq!(
                answer["choices"][0]["finish_reason"], "stop",
                "{name}: {text}"
            );
            let value: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{name} seed {seed}: {e}: {text:?}"));
            json_schema_check::check(&value, &schema)
                .unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
            checked += 1;
        }
    }
    assert_eq!(checked, 16);
}

#[test]
fn json_object_gives_an_object_streamed_as_whole_text() {
    let s = server();
    let body = json!({
        "messages": [{"role": "user", "content": "Any object."}],
        "response_format": {"type": "json_object"},
        "max_tokens": 200,
        "temperature": 0,
        "stream": true,
    });
    let r = s.post("/v1/chat/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let mut text = String::new();
    let mut finish = None;
    for event in r.events() {
        if event == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&event).unwrap();
        text.push_str(
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or(""),
        );
        if let Some(f) = chunk["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    match finish.as_deref() {
        Some("stop") => {
            let value: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert!(value.is_object(), "{text}");
        }
        Some("length") => assert!(text.starts_with('{'), "{text}"),
        other => panic!("finish {other:?}: {text}"),
    }
}

#[test]
fn a_cut_output_ends_with_length_and_is_a_prefix_the_schema_allows() {
    let s = server();
    let schema = json!({
        "type": "object",
        "properties": {"mood": {"enum": ["happy", "sad"]}, "n": {"type": "integer"}},
        "required": ["mood", "n"],
        "additionalProperties": false
    });
    let body = json!({
        "prompt": "JSON:",
        "response_format": json_schema_format("cut", &schema),
        "max_tokens": 3,
        "temperature": 0,
    });
    let r = s.post("/v1/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    let text = text_of(&answer);
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{text}");
    let full = r#"{"mood":"#;
    assert!(
        full.starts_with(&text) || text.starts_with(full),
        "{text:?} is not a prefix of an allowed object"
    );
}

#[test]
fn a_schema_that_cannot_be_compiled_is_a_400_saying_why() {
    let s = server();
    for (schema, why) in [
        (json!({"$ref": "#/$defs/missing"}), "missing"),
        (json!({"type": "not-a-type"}), "not-a-type"),
        (json!("just a string"), "must be a JSON object"),
    ] {
        let body = json!({
            "prompt": "x",
            "max_tokens": 2,
            "response_format": json_schema_format("bad", &schema),
        });
        let r = s.post("/v1/completions", &body);
        assert_eq!(r.status, 400, "{schema}: {}", r.text());
        assert_eq!(r.error_param().as_deref(), Some("response_format"));
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(why), "{schema}: {message}");
    }
    for (format, param) in [
        (json!({"type": "xml"}), "response_format"),
        (json!({"type": "json_schema"}), "response_format"),
        (
            json!({"type": "json_schema", "json_schema": {"name": "a", "extra": 1}}),
            "response_format",
        ),
    ] {
        let body = json!({"prompt": "x", "max_tokens": 2, "response_format": format});
        let r = s.post("/v1/completions", &body);
        assert_eq!(r.status, 400, "{format}: {}", r.text());
        let got = r.error_param().unwrap_or_default();
        assert!(got.starts_with(param), "{format}: param {got}");
    }
}
