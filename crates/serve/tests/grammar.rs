//! Raw constraints on the server: a `regex` and a Lark `grammar` hold a fixture model's
//! random output to them on both endpoints, and a grammar or regex that cannot compile, or
//! one combined with `response_format`, is a 400 naming the field.

mod support;

use serde_json::{Value, json};
use support::{Server, tiny_server};

fn server() -> Server {
    tiny_server(|_| {})
}

fn chat(extra: Value) -> Value {
    let mut body = json!({
        "messages": [{"role": "user", "content": "Answer."}],
        "max_tokens": 40,
        "temperature": 1.0,
        "seed": 3,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

#[test]
fn regex_and_grammar_hold_the_output() {
    let s = server();
    for seed in [1, 2] {
        let r = s.post(
            "/v1/chat/completions",
            &chat(json!({"regex": "[0-9]{3}-[a-c]{2}", "seed": seed})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let text = r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        let b = text.as_bytes();
        assert!(
            b.len() == 6
                && b[..3].iter().all(u8::is_ascii_digit)
                && b[3] == b'-'
                && b[4..].iter().all(|c| (b'a'..=b'c').contains(c)),
            "{text:?}"
        );
    }
    let grammar = "start: answer \" \" answer\nanswer: \"yes\" | \"no\"\n";
    let r = s.post(
        "/v1/completions",
        &json!({"prompt": "Q:", "max_tokens": 20, "grammar": grammar, "seed": 5}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.json()["choices"][0]["text"].as_str().unwrap().to_string();
    let words: Vec<&str> = text.split(' ').collect();
    assert!(
        words.len() == 2 && words.iter().all(|w| *w == "yes" || *w == "no"),
        "{text:?}"
    );
}

#[test]
fn constraints_that_cannot_compile_or_conflict_are_400() {
    let s = server();
    for (extra, param) in [
        (json!({"grammar": "start: undefined_rule"}), "grammar"),
        (json!({"grammar": "this is not lark"}), "grammar"),
        (json!({"regex": "(unclosed"}), "regex"),
        (json!({"regex": "a", "grammar": "start: \"a\""}), "regex"),
        (
            json!({"regex": "a", "response_format": {"type": "json_object"}}),
            "regex",
        ),
    ] {
        let r = s.post("/v1/chat/completions", &chat(extra.clone()));
        assert_eq!(r.status, 400, "{extra}: {}", r.text());
        assert_eq!(r.error_param().as_deref(), Some(param), "{extra}");
    }
}
