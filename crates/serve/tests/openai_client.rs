//! The official `openai` Python client against the server on the default model: chat and
//! completions, streamed and not, log-probabilities, seeds, stop strings and typed errors.
//!
//! The client is installed into a virtual environment under the target directory on first
//! run (`python3 -m venv`, then `pip install openai`). Needs the default model fetched
//! (`cargo xtask test` does it first).

mod python_support;
mod support;

use python_support::{python_with, run_script};
use support::{Server, config, default_model};

#[test]
fn the_openai_python_client_works_against_the_default_model() {
    let python = python_with(&["openai"], &["openai"]);
    let model = default_model();
    let mut config = config(&model.display().to_string(), 1024);
    config.engine.sequences = 2;
    let s = Server::start(config);
    let args = [
        format!("http://{}/v1", s.addr),
        "gemma-3-270m-q4_k_m".into(),
    ];
    run_script(&python, "openai_client.py", &args);
}
