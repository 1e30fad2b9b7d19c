//! `cargo xtask test`: the whole gate CI runs, stopping at the first step that fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

/// Where the tests that need the default model find its path: the CLI resolves the cache once
/// (`rinfer fetch`) and hands the result down.
const TEST_MODEL_VAR: &str = "RINFER_TEST_MODEL";

/// The AArch64 target whose kernels are built and tested under qemu (linker and runner in
/// `.cargo/config.toml`).
const ARM_TARGET: &str = "aarch64-unknown-linux-gnu";

/// The NVRTC the kernel compile test uses: CUDA 12's runtime compiler as a Python wheel (no
/// GPU or toolkit needed), pinned so that CI compiles with a known version.
const NVRTC_WHEEL: &str = "nvidia-cuda-nvrtc-cu12==12.9.86";

/// The line the compile test prints for each architecture it compiled for.
const COMPILED_LINE: &str = "compiled the kernel program for sm_";

/// The qemu CPU with plain NEON only (no dot-product or matrix-multiply extension), on which the
/// kernel detection must fall back to the NEON kernels.
const PLAIN_NEON_RUNNER: &str = "qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu cortex-a53";

/// Fetches the model the tests need, then checks formatting, lints (with and without the `cuda`
/// feature), runs every test, compiles the CUDA kernels with the real NVRTC, and builds and
/// tests the kernels for AArch64.
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
    kernels_compile()?;
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

/// The whole CUDA kernel program compiled with the real NVRTC for every targeted GPU
/// generation: the wheel installed into `target/nvrtc` on first use, its lib folder put on
/// `LD_LIBRARY_PATH`, and the test's output checked so that a skip (no NVRTC found) fails here.
fn kernels_compile() -> Result<()> {
    let lib = nvrtc_wheel(&crate::workspace_root().join("target").join("nvrtc"))?;
    let mut library_path = std::ffi::OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        library_path.push(":");
        library_path.push(old);
    }
    let args = [
        "test",
        "-p",
        "rinfer-cuda",
        "--features",
        "cuda",
        "--test",
        "kernels_compile",
        "--",
        "--nocapture",
    ];
    eprintln!(
        "==> LD_LIBRARY_PATH={} cargo {}",
        lib.display(),
        args.join(" ")
    );
    let output = Command::new("cargo")
        .args(args)
        .env("LD_LIBRARY_PATH", library_path)
        .current_dir(crate::workspace_root())
        .output()
        .context("cannot run cargo")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprint!("{}{stdout}", String::from_utf8_lossy(&output.stderr));
    ensure!(output.status.success(), "the kernel compile test failed");
    let compiled = stdout.matches(COMPILED_LINE).count();
    ensure!(
        compiled == 4,
        "the kernel compile test compiled for {compiled} of 4 architectures (no NVRTC found?)"
    );
    Ok(())
}

/// The lib folder of the NVRTC wheel in a venv under `root` (created on first use).
fn nvrtc_wheel(root: &Path) -> Result<PathBuf> {
    let venv = root.join("venv");
    let pip = venv.join("bin").join("pip");
    if let Some(lib) = wheel_lib(&venv) {
        return Ok(lib);
    }
    if !pip.is_file() {
        run_shown(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    run_shown(Command::new(&pip).args(["install", "--quiet", NVRTC_WHEEL]))?;
    wheel_lib(&venv)
        .with_context(|| format!("pip installed no libnvrtc.so.12 under {}", venv.display()))
}

/// `venv/lib/python3.*/site-packages/nvidia/cuda_nvrtc/lib`, if it holds `libnvrtc.so.12`.
fn wheel_lib(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|python| python.path().join("site-packages/nvidia/cuda_nvrtc/lib"))
        .find(|dir| dir.join("libnvrtc.so.12").is_file())
}

/// Prints and runs `command`, failing unless it succeeds.
fn run_shown(command: &mut Command) -> Result<()> {
    let shown = format!("{command:?}");
    eprintln!("==> {shown}");
    let status = command
        .status()
        .with_context(|| format!("cannot run {shown}"))?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(())
}
