//! Reasoning controls on the server: `chat_template_kwargs` and `reasoning_effort` reach
//! the chat template (a Qwen3-style template whose `enable_thinking: false` pre-fills an empty
//! reasoning block, so the prompt grows), on chat completions and through Anthropic's
//! `thinking` and the Responses API's `reasoning.effort`; bad values are 400s.

mod support;

use serde_json::{Value, json};
use support::{Server, templated_config};

fn prompt_tokens(s: &Server, extra: Value) -> u64 {
    let mut body = json!({
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 1,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = s.post("/v1/chat/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["usage"]["prompt_tokens"].as_u64().unwrap()
}

#[test]
fn template_variables_reach_the_template_under_every_api() {
    let config = templated_config(
        "models/qwen3-tiny-q5_k_m.gguf",
        "chat_templates/qwen3_thinking.jinja",
        512,
    );
    let s = Server::start(config);
    let plain = prompt_tokens(&s, json!({}));
    let off = prompt_tokens(
        &s,
        json!({"chat_template_kwargs": {"enable_thinking": false}}),
    );
    assert!(
        off > plain,
        "enable_thinking false adds the empty block: {off} vs {plain}"
    );
    let on = prompt_tokens(
        &s,
        json!({"chat_template_kwargs": {"enable_thinking": true}}),
    );
    assert_eq!(on, plain);
    let effort = prompt_tokens(&s, json!({"reasoning_effort": "high"}));
    assert!(effort > plain, "reasoning_effort reaches the template");

    // Anthropic's `thinking` is the template's `enable_thinking`.
    let count = |thinking: &str| {
        let r = s.post(
            "/v1/messages/count_tokens",
            &json!({"messages": [{"role": "user", "content": "Hi"}],
                    "thinking": {"type": thinking}}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["input_tokens"].as_u64().unwrap()
    };
    assert_eq!(count("disabled"), off);
    assert_eq!(count("enabled"), plain);
    // The Responses API's `reasoning.effort` is `reasoning_effort`.
    let r = s.post(
        "/v1/responses",
        &json!({"input": "Hi", "max_output_tokens": 1, "reasoning": {"effort": "high"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["usage"]["input_tokens"].as_u64(), Some(effort));

    for (body, param) in [
        (json!({"reasoning_effort": "extreme"}), "reasoning_effort"),
        (
            json!({"chat_template_kwargs": {"messages": []}}),
            "chat_template_kwargs.messages",
        ),
    ] {
        let mut request = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1});
        for (k, v) in body.as_object().unwrap() {
            request[k] = v.clone();
        }
        let r = s.post("/v1/chat/completions", &request);
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.error_param().as_deref(), Some(param));
    }
    let r = s.post(
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 1, "reasoning_effort": "low"}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.error_param().as_deref(), Some("reasoning_effort"));
}
