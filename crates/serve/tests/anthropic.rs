//! Anthropic's Messages API on the server, driven by the official `anthropic` Python
//! client: create and stream (the same text for the same seed), tools with `tool_choice` `any`
//! and a named tool (schema-valid input, whole and streamed), a `tool_result` round trip,
//! count_tokens, `x-api-key`, and typed errors. A fixture model with random weights, served
//! with Qwen's tool template, keeps it fast; the constraint makes its calls valid.
//!
//! The client is installed into the tests' virtual environment on first run (`pip install
//! anthropic`).

mod python_support;
mod support;

use python_support::{python_with, run_script};
use rinfer_serve::ApiKeys;
use support::{Server, templated_config};

#[test]
fn the_anthropic_python_client_works_against_the_messages_api() {
    let python = python_with(&["anthropic", "jsonschema"], &["anthropic", "jsonschema"]);
    let key = "sk-anthropic-test";
    let mut config = templated_config(
        "models/qwen2-tiny-q4_k_m.gguf",
        "chat_templates/qwen2_5_tools.jinja",
        1024,
    );
    config.api_keys = ApiKeys::new([key]).unwrap();
    let s = Server::start(config);
    let args = [
        format!("http://{}", s.addr),
        "qwen2-tiny-q4_k_m".to_string(),
        key.to_string(),
    ];
    run_script(&python, "anthropic_client.py", &args);
}
