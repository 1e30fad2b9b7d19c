//! The official `openai` Python client against `rinfer serve` on the default model: chat and
//! completions, streamed and not, log-probabilities, seeds, stop strings and typed errors.
//!
//! The client is installed into a virtual environment under the target directory on first
//! run (`python3 -m venv`, then `pip install openai`). Needs the default model fetched
//! (`cargo xtask test` does it first).

mod python_support;
mod serve_support;

use python_support::{python_with, run_script};
use serve_support::{Server, default_model};

#[test]
fn the_openai_python_client_works_against_the_default_model() {
    let python = python_with(&["openai"], &["openai"]);
    let model = default_model();
    let s = Server::start(&[
        "--model",
        &model.display().to_string(),
        "--ctx",
        "1024",
        "--parallel",
        "2",
    ]);
    let args = [
        format!("http://{}/v1", s.addr),
        "gemma-3-270m-q4_k_m".into(),
    ];
    run_script(&python, "serve_openai_client.py", &args, &s.log);
}
