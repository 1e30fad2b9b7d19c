//! A Python with the official `openai` client (and any other packages a test names), in a
//! virtual environment under the target directory, made on first use (`python3 -m venv`, then
//! `pip install`), and running a script in it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python in which `modules` import, installing `packages` into the shared test venv when
/// one does not.
pub fn python_with(modules: &[&str], packages: &[&str]) -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("openai-venv");
    let python = venv.join("bin/python");
    let imports = format!("import {}", modules.join(", "));
    let has_all = |python: &Path| {
        Command::new(python)
            .args(["-c", &imports])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_all(&python) {
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
    if !python.exists() {
        run(
            Command::new("python3").args(["-m", "venv", &venv.display().to_string()]),
            "create a Python venv",
        );
    }
    run(
        // `python -m pip`: a venv copied from another target keeps the other's `bin/pip`.
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet"])
            .args(packages),
        "pip install the test's packages",
    );
    assert!(has_all(&python), "{imports} still fails");
    python
}

/// Runs `script` (under `tests/`) with `args`, failing the test with its output when it exits
/// non-zero.
pub fn run_script(python: &Path, script: &str, args: &[String]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python checks failed:\n{stdout}\n{stderr}"
    );
    eprintln!("{stdout}");
}
