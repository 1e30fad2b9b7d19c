//! Structured output through the official `openai` Python client on the default model:
//! `response_format` with JSON schemas (nested objects, arrays, enums, bounded numbers,
//! required and optional fields) and `json_object`, on chat and completions, and the
//! client's own `parse` helper with a Pydantic model; every answer parses and validates
//! (checked with the `jsonschema` package). Also: a server that requires an API key answers
//! the client's requests with the key, and raises `AuthenticationError` without it.

mod python_support;
mod support;

use python_support::{python_with, run_script};
use rinfer_serve::ApiKeys;
use support::{Server, config, default_model};

#[test]
fn constrained_outputs_from_the_openai_client_all_validate() {
    let python = python_with(&["openai", "jsonschema"], &["openai", "jsonschema"]);
    let model = default_model();
    let mut config = config(&model.display().to_string(), 1024);
    config.engine.sequences = 4;
    config.api_keys = ApiKeys::new(["sk-structured-test"]).unwrap();
    let s = Server::start(config);
    let args = [
        format!("http://{}/v1", s.addr),
        "gemma-3-270m-q4_k_m".to_string(),
        "sk-structured-test".to_string(),
    ];
    run_script(&python, "structured_client.py", &args);
}
