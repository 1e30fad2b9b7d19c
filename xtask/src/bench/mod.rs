//! `cargo xtask bench [what]`: benchmarks, dispatched on the first argument.
//!
//! `model` (the default) measures prompt processing, generation, load-to-first-token and peak
//! memory of the `rinfer` binary, and with `--vs-llama-cpp` llama.cpp beside it in the same run;
//! `make-model` writes the synthetic models (llama, Qwen3-MoE, Qwen3.5, LFM2, DeepSeek-V2, Gemma 4,
//! GLM-4.5, Qwen3.5-MoE) the
//! model bench can also run, and the embedding models (bge-small's and nomic-embed's shapes)
//! the embeddings bench runs;
//! `kernels` measures matvec and matmul of every weight type against the machine's bandwidth;
//! `serve` measures `rinfer serve` at several concurrent streams, and with `--multi-turn` the time
//! to first token of each turn of a resent chat, beside llama.cpp's `llama-server`, and with
//! `--embeddings` the embedding throughput beside `llama-server --embedding`;
//! `speculative` measures decoding with and without prompt-lookup speculation.

mod args;
mod cache;
mod ceiling;
mod child;
mod dialogue;
mod embeddings;
mod history;
mod kernels;
mod llama_cpp;
mod measure;
mod model;
mod model_vocab;
mod multi_turn;
mod options;
mod report;
mod rinfer;
mod serve;
mod server;
mod speculative;
mod stats;
mod synthetic_families;
mod synthetic_model;
mod synthetic_quant_mix;
mod synthetic_shapes;
mod synthetic_vocab;

use anyhow::Result;

/// Runs the benchmark the first argument names, handing it the remaining arguments.
pub fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("model") => model::run(&args[1..]),
        Some("make-model") => synthetic_model::run(&args[1..]),
        Some("kernels") => {
            let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
            kernels::run(&rest)
        }
        Some("speculative") => {
            let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
            speculative::run(&rest)
        }
        Some(ceiling::READ_BANDWIDTH_COMMAND) => ceiling::print_read_bandwidth(&args[1..]),
        Some("serve") => {
            let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
            serve::run(&rest)
        }
        _ => model::run(args),
    }
}
