//! `cargo xtask test`: the whole gate CI runs, stopping at the first step that fails.

use std::process::Command;

use anyhow::Result;

/// Where the tests that need the default model find its path: the CLI resolves the cache once
/// (`rinfer fetch`) and hands the result down.
const TEST_MODEL_VAR: &str = "RINFER_TEST_MODEL";

/// The AArch64 target whose kernels are built and tested under qemu (linker and runner in
/// `.cargo/config.toml`).
const ARM_TARGET: &str = "aarch64-unknown-linux-gnu";

/// The qemu CPU with plain NEON only (no dot-product or matrix-multiply extension), on which the
/// kernel detection must fall back to the NEON kernels.
const PLAIN_NEON_RUNNER: &str = "qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu cortex-a53";

/// Fetches the model the tests need, then checks formatting, lints (with and without the `cuda`
/// feature), runs every test, and builds and tests the kernels for AArch64.
pub fn run() -> Result<()> {
    let model = crate::fetch_model::run()?;
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
    let mut test = Command::new("cargo");
    test.env(TEST_MODEL_VAR, &model);
    crate::cargo_command(&["test", "--workspace"], test)?;
    crate::cargo(&["test", "-p", "rinfer-cuda", "--features", "cuda"])?;
    aarch64()?;
    eprintln!("==> all checks passed");
    Ok(())
}

/// The AArch64 gate: lints of the kernels' AArch64 code, the command-line tool built for
/// AArch64, the kernel tests under qemu on a CPU with every extension the kernels use (NEON,
/// dot product, int8 matrix multiply: each level is tested against the scalar reference), and
/// the kernel-table tests again on plain NEON, where detection must fall back.
fn aarch64() -> Result<()> {
    let target = ["--target", ARM_TARGET];
    crate::cargo(
        &[
            &["clippy", "-p", "rinfer-kernels", "--all-targets"][..],
            &target,
            &["--", "-D", "warnings"],
        ]
        .concat(),
    )?;
    crate::cargo(&[&["build", "-p", "rinfer-cli"][..], &target].concat())?;
    crate::cargo(&[&["test", "-p", "rinfer-kernels"][..], &target].concat())?;
    let mut plain = Command::new("cargo");
    plain.env(
        "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
        PLAIN_NEON_RUNNER,
    );
    crate::cargo_command(
        &[
            &["test", "-p", "rinfer-kernels", "--lib"][..],
            &target,
            &["--", "dispatch", "matvec", "neon", "vector"],
        ]
        .concat(),
        plain,
    )
}
