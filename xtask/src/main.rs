//! Project automation, run as `cargo xtask <task>`: the full test gate, benchmarks, fetching the
//! default model and the tidy checks that guard the architecture. Each task shells out to cargo or to
//! the `rinfer` CLI so that no logic exists twice.

mod bench;
mod fetch_model;
mod test;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  test          fetch the model, then cargo fmt --check, clippy -D warnings (also with the cuda
                feature), cargo test --workspace, the cuda feature's host-side tests and the
                CUDA kernels compiled with NVRTC (the nvidia-cuda-nvrtc-cu12 wheel, installed
                into target/nvrtc with pip)
  bench         measure rinfer on a model (pp128, pp512, pp2048, tg128, load-to-first-token, peak RSS);
                --vs-llama-cpp measures llama.cpp beside it; `cargo xtask bench --help` for more
  bench make-model [llama-1b|qwen3moe|qwen35|lfm2|deepseek2|gemma4|glm4moe|qwen35moe|
                   bge-small|nomic-embed] [PATH]
                write a synthetic Q4_K_M model (llama 1B by default; into the models cache
                unless PATH is given)
  bench kernels [--json] [TYPE...]
                matvec GB/s (1 and 2 threads, vs measured read bandwidth) and matmul GFLOP/s of
                every weight type (or the named ones) at real model shapes
  bench serve [--streams 1,4,16] [--max-tokens N] [--threads N] [--vs-llama-cpp]
                aggregate generated tok/s and p50/p99 inter-token latency of `rinfer serve` on
                the default model at several concurrent streams
  bench serve --multi-turn [--model default|SYNTHETIC|PATH] (SYNTHETIC: as for bench --model)
              [--turns 6] [--system-rules 28] [--max-tokens 32] [--threads N] [--rinfer-only]
                time to first token of each turn of a chat that resends its history (a system
                prompt of about 1,000 tokens), rinfer serve beside llama-server, one slot each,
                and the prompt tokens rinfer reused
  bench serve --embeddings [--model bge-small|nomic-embed|PATH] [--rounds 10] [--threads N]
              [--rinfer-only]
                embedding throughput (requests of 64 short texts to /v1/embeddings) of rinfer
                serve beside llama-server --embedding, 16 slots each (default model: the
                synthetic bge-small)
  bench speculative [--threads N] [--repeat 3] [--max-tokens 256] [--draft-max 8]
                  [--draft-model PATH]
                decode tok/s with and without prompt-lookup (or draft-model) speculation on
                the default model:
                rewriting a given file, quoting a given passage, free generation; with the
                share of guesses accepted and whether both wrote the same tokens
  fetch-model   download and verify the default model (runs `rinfer fetch`)
  tidy          check the crate layering (a crate depends only on crates below it), that no
                crate's top-level modules import each other in a cycle, and that no source
                file is over 800 lines";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["test"] => test::run(),
        ["bench", ..] => bench::run(&args[1..]),
        ["fetch-model"] => fetch_model::run().map(drop),
        ["tidy"] => tidy::run(),
        ["help" | "--help" | "-h"] => {
            println!("{USAGE}");
            Ok(())
        }
        _ => {
            eprintln!("{USAGE}");
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
    cargo_command(args, Command::new("cargo"))
}

/// [`cargo`] with `command` already set up (environment, captured output).
fn cargo_command(args: &[&str], mut command: Command) -> Result<()> {
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("==> {shown}");
    let status = command
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}
