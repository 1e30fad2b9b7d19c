//! OpenAI's Responses API on `rinfer serve`, driven by the official `openai` Python client:
//! create and stream (the same text for the same seed), function tools (schema-valid calls,
//! whole and streamed), a `function_call_output` continuation through
//! `previous_response_id`, retrieve, delete, `store: false`, typed errors. A fixture model
//! with random weights, served with Qwen's tool template, keeps it fast.

mod python_support;
mod serve_support;

use python_support::{python_with, run_script};
use serve_support::{Server, fixture};

#[test]
fn the_openai_python_client_works_against_the_responses_api() {
    let python = python_with(&["openai", "jsonschema"], &["openai", "jsonschema"]);
    let model = fixture("models/qwen2-tiny-q4_k_m.gguf");
    let template = fixture("chat_templates/qwen2_5_tools.jinja");
    let s = Server::start(&[
        "--model",
        &model,
        "--chat-template",
        &template,
        "--ctx",
        "1024",
        "--threads",
        "2",
    ]);
    let args = [
        format!("http://{}/v1", s.addr),
        "qwen2-tiny-q4_k_m".to_string(),
    ];
    run_script(&python, "serve_responses_client.py", &args, &s.log);
}
