//! The official `openai` Python client against `rinfer serve` on the default model: chat and
//! completions, streamed and not, log-probabilities, seeds, stop strings and typed errors.
//!
//! The client is installed into a virtual environment under the target directory on first
//! run (`python3 -m venv`, then `pip install openai`). Needs the default model fetched
//! (`cargo xtask test` does it first).

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serve_support::Server;

fn default_model() -> PathBuf {
    let home = std::env::var_os("RINFER_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/rinfer")
        });
    let path = home.join("models/gemma-3-270m-q4_k_m.gguf");
    assert!(
        path.exists(),
        "{} is missing: run `cargo xtask fetch-model` first (`cargo xtask test` does)",
        path.display()
    );
    path
}

/// A Python with the `openai` package, in a venv made on first use.
fn python_with_openai() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("openai-venv");
    let python = venv.join("bin/python");
    let has_openai = |python: &Path| {
        Command::new(python)
            .args(["-c", "import openai"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_openai(&python) {
        return python;
    }
    let run = |cmd: &mut Command, what: &str| {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot {what}: {e} (python3 with venv and pip is needed)"));
        assert!(
            out.status.success(),
            "cannot {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(
        Command::new("python3").args(["-m", "venv", &venv.display().to_string()]),
        "create a Python venv",
    );
    run(
        Command::new(venv.join("bin/pip")).args(["install", "--quiet", "openai"]),
        "pip install openai",
    );
    assert!(has_openai(&python), "openai is still not importable");
    python
}

#[test]
fn the_openai_python_client_works_against_the_default_model() {
    let python = python_with_openai();
    let model = default_model();
    let s = Server::start(&[
        "--model",
        &model.display().to_string(),
        "--ctx",
        "1024",
        "--parallel",
        "2",
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve_openai_client.py");
    let out = Command::new(python)
        .arg(script)
        .arg(format!("http://{}/v1", s.addr))
        .arg("gemma-3-270m-q4_k_m")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openai client checks failed:\n{stdout}\n{stderr}\nserver log:\n{}",
        s.log.lock().unwrap().join("\n")
    );
    eprintln!("{stdout}");
}
