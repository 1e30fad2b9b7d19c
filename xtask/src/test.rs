//! `cargo xtask test`: the whole gate CI runs, stopping at the first step that fails.

use anyhow::Result;

/// Fetches the model the tests need, then checks formatting, lints (with and without the `cuda`
/// feature) and runs every test.
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
    // The CUDA backend's feature code builds and its host-side tests run without a GPU.
    crate::cargo(&[
        "clippy",
        "-p",
        "rinfer-cuda",
        "-p",
        "rinfer-model",
        "-p",
        "rinfer-cli",
        "--features",
        "rinfer-cli/cuda",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    // `--workspace` because default-members leaves xtask out, and its tidy test must run.
    crate::cargo(&["test", "--workspace"])?;
    crate::cargo(&["test", "-p", "rinfer-cuda", "--features", "cuda"])?;
    eprintln!("==> all checks passed");
    Ok(())
}
