//! OpenAI's Responses API on the server, driven by the official `openai` Python client:
//! create and stream (the same text for the same seed), function tools (schema-valid calls,
//! whole and streamed), a `function_call_output` continuation through
//! `previous_response_id`, retrieve, delete, `store: false`, typed errors. A fixture model
//! with random weights, served with Qwen's tool template, keeps it fast.

mod python_support;
mod support;

use python_support::{python_with, run_script};
use support::{Server, templated_config};

#[test]
fn the_openai_python_client_works_against_the_responses_api() {
    let python = python_with(&["openai", "jsonschema"], &["openai", "jsonschema"]);
    let config = templated_config(
        "models/qwen2-tiny-q4_k_m.gguf",
        "chat_templates/qwen2_5_tools.jinja",
        1024,
    );
    let s = Server::start(config);
    let args = [
        format!("http://{}/v1", s.addr),
        "qwen2-tiny-q4_k_m".to_string(),
    ];
    run_script(&python, "responses_client.py", &args);
}
