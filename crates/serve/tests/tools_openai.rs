//! Tool calls through the official `openai` Python client: `required` and named calls, whole
//! and streamed, with and without parallel calls, on the default model (generic format, plus
//! `auto` and a round trip with the tool's result) and on fixture models served with Qwen's
//! and Llama 3's templates.

mod python_support;
mod support;

use python_support::{python_with, run_script};
use support::{Server, config, default_model, fixture};

fn run(model: &str, model_id: &str, template: Option<&str>, mode: &str) {
    let python = python_with(&["openai", "jsonschema"], &["openai", "jsonschema"]);
    let mut config = config(model, 1024);
    config.engine.sequences = 2;
    config.chat_template = template.map(fixture);
    let s = Server::start(config);
    let script_args = [
        format!("http://{}/v1", s.addr),
        model_id.to_string(),
        mode.to_string(),
    ];
    run_script(&python, "tools_client.py", &script_args);
}

#[test]
fn tool_calls_on_the_default_model() {
    let model = default_model().display().to_string();
    run(&model, "gemma-3-270m-q4_k_m", None, "full");
}

#[test]
fn tool_calls_with_a_qwen_template() {
    let model = fixture("models/qwen2-tiny-q4_k_m.gguf");
    let template = "chat_templates/qwen2_5_tools.jinja";
    run(&model, "qwen2-tiny-q4_k_m", Some(template), "constrained");
}

#[test]
fn tool_calls_with_a_llama3_template() {
    let model = fixture("models/llama-tiny-q4_k.gguf");
    let template = "chat_templates/llama3_1_tools.jinja";
    run(&model, "llama-tiny-q4_k", Some(template), "constrained");
}
