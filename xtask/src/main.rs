//! Project automation, run as `cargo xtask <task>`: the full test gate, fetching the default
//! model and the tidy checks that guard the crate layering. Each task shells out to cargo or to
//! the `rinfer` CLI so that no logic exists twice.

mod bench;
mod fetch_model;
mod test;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

const USAGE_HEAD: &str = "\
usage: cargo xtask <task>

tasks:
  test          fetch the model, then cargo fmt --check, clippy -D warnings and cargo test --workspace
  fetch-model   download and verify the default model (runs `rinfer fetch`)
  tidy          check that crates depend only on crates below them
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args[..] {
        ["test"] => test::run(),
        ["fetch-model"] => fetch_model::run(),
        ["tidy"] => tidy::run(),
        ["bench", ref rest @ ..] => bench::run(rest),
        ["help" | "--help" | "-h"] => {
            println!("{USAGE_HEAD}{}", bench::USAGE);
            Ok(())
        }
        _ => {
            eprintln!("{USAGE_HEAD}{}", bench::USAGE);
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Prints `cargo <args>`, runs it in the workspace root with inherited output, and fails unless
/// it succeeds.
fn cargo(args: &[&str]) -> Result<()> {
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("==> {shown}");
    let status = Command::new("cargo")
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}
