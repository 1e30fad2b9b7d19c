//! `cargo xtask test`: the whole gate CI runs, stopping at the first step that fails.

use anyhow::Result;

/// Fetches the model the tests need, then checks formatting, lints and runs every test.
pub fn run() -> Result<()> {
    crate::fetch_model::run()?;
    crate::cargo(&["fmt", "--all", "--", "--check"])?;
    crate::cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    // `--workspace` because default-members leaves xtask out, and its tidy test must run.
    crate::cargo(&["test", "--workspace"])?;
    eprintln!("==> all checks passed");
    Ok(())
}
