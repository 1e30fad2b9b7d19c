//! `cargo xtask fetch-model`: the CLI's own `rinfer fetch`, so the download logic and the cache
//! location live once.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

/// Downloads and verifies the default model into the cache (a no-op when already there) and
/// returns its path, which `rinfer fetch` prints as its last line.
pub fn run() -> Result<PathBuf> {
    let args = ["run", "--quiet", "-p", "rinfer-cli", "--", "fetch"];
    eprintln!("==> cargo {}", args.join(" "));
    let out = Command::new("cargo")
        .args(args)
        .current_dir(crate::workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run `cargo run -p rinfer-cli -- fetch`")?;
    ensure!(
        out.status.success(),
        "`rinfer fetch` failed ({})",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or_default().trim();
    ensure!(!path.is_empty(), "`rinfer fetch` printed no path");
    println!("{path}");
    Ok(PathBuf::from(path))
}
