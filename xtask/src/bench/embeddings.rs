//! `cargo xtask bench serve --embeddings`: embedding throughput, one `/v1/embeddings` request
//! of 64 short texts at a time, against `rinfer serve` and llama.cpp's `llama-server
//! --embedding` (built as the model bench builds llama-bench), each with 16 slots, the same
//! model and threads. Prints texts and prompt tokens per second for both, side by side.
//!
//! The model is a synthetic embedding model by name (`bge-small`, the default, or
//! `nomic-embed`: seeded random weights of bge-small-en-v1.5's and nomic-embed-text-v1.5's
//! shapes in llama.cpp's Q4_K_M mix, written into the models cache on first use) or an
//! embedding GGUF (`--model PATH`). Each server answers one request first, then `--rounds`
//! requests whose times are summed.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::args::{for_each_option, positive_count};
use super::llama_cpp::LlamaCpp;
use super::server::{Server, post};
use super::synthetic_model;

/// Texts per request.
const TEXTS: usize = 64;
/// Slots of both servers.
const SLOTS: usize = 16;
/// Context of each slot.
const SLOT_CONTEXT: usize = 512;
/// Sentence parts the texts are built from (each text a different combination).
const SUBJECTS: [&str; 8] = [
    "The lighthouse keeper",
    "A fishing boat",
    "The storm",
    "An old map",
    "The harbour master",
    "A message in a bottle",
    "The night watch",
    "A flock of gulls",
];
const PREDICATES: [&str; 8] = [
    "arrived before dawn.",
    "was seen near the rocks.",
    "changed the course of the evening.",
    "kept everyone awake until morning.",
    "was written about in the log.",
    "surprised the villagers.",
    "waited for the tide to turn.",
    "disappeared into the fog.",
];

/// The synthetic model run without `--model`.
const DEFAULT_MODEL: &str = "bge-small";

struct Options {
    /// A synthetic embedding model's name or a GGUF's path.
    model: String,
    rounds: usize,
    threads: usize,
    rinfer_only: bool,
}

fn parse(args: &[&str]) -> Result<Options> {
    let mut options = Options {
        model: DEFAULT_MODEL.into(),
        rounds: 10,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rinfer_only: false,
    };
    for_each_option(args, &["--rinfer-only"], |arg, value| {
        match (arg, value) {
            ("--rinfer-only", _) => options.rinfer_only = true,
            ("--model", Some(value)) => options.model = value.to_string(),
            ("--rounds", Some(value)) => options.rounds = positive_count(arg, value)?,
            ("--threads", Some(value)) => options.threads = positive_count(arg, value)?,
            (other, _) => bail!("unknown option {other}; see `cargo xtask help`"),
        }
        Ok(())
    })?;
    Ok(options)
}

/// The `TEXTS` texts of a request, each different.
fn texts() -> Vec<String> {
    (0..TEXTS)
        .map(|i| format!("{} {}", SUBJECTS[i % 8], PREDICATES[(i / 8) % 8]))
        .collect()
}

/// One request of every text; returns the prompt tokens the server counted.
fn embed_once(addr: SocketAddr, texts: &[String]) -> Result<u64> {
    // No `model`: each server answers with the one it serves.
    let body = json!({"input": texts}).to_string();
    let mut reader = post(addr, "/v1/embeddings", &body)?;
    let mut response = String::new();
    reader.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("a response without a body")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("an embeddings request failed: {head}\n{body}");
    }
    let value: Value = serde_json::from_str(body).context("the response is not JSON")?;
    let data = value["data"].as_array().map_or(0, Vec::len);
    if data != texts.len() {
        bail!("expected {} embeddings, got {data}", texts.len());
    }
    Ok(value["usage"]["prompt_tokens"].as_u64().unwrap_or(0))
}

/// Texts and prompt tokens per second over `rounds` requests after a warm-up.
fn measure(server: &Server, rounds: usize) -> Result<(f64, f64)> {
    let texts = texts();
    embed_once(server.addr, &texts)?;
    let start = Instant::now();
    let mut tokens = 0;
    for _ in 0..rounds {
        tokens += embed_once(server.addr, &texts)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(((rounds * TEXTS) as f64 / elapsed, tokens as f64 / elapsed))
}

/// Runs the benchmark and prints a Markdown table.
pub fn run(args: &[&str]) -> Result<()> {
    let options = parse(args)?;
    let model_path = match synthetic_model::embedding_by_name(&options.model) {
        Some(shape) => synthetic_model::cached(shape)?,
        None => PathBuf::from(&options.model),
    };
    if !model_path.is_file() {
        bail!(
            "no model file {} (the synthetic embedding models: {})",
            model_path.display(),
            synthetic_model::EMBEDDING_MODELS.map(|m| m.0).join(", ")
        );
    }
    crate::cargo(&["build", "--release", "-p", "rinfer-cli"])?;
    let model = model_path.to_string_lossy().into_owned();
    let threads = options.threads.to_string();
    let slots = SLOTS.to_string();
    let context = SLOT_CONTEXT.to_string();
    let mut server = Server::rinfer(&[
        "-m",
        &model,
        "--parallel",
        &slots,
        "--ctx",
        &context,
        "-t",
        &threads,
        "--queue",
        &TEXTS.to_string(),
    ])?;
    let ours = measure(&server, options.rounds)?;
    server.stop();
    let theirs = if options.rinfer_only {
        None
    } else {
        let llama = LlamaCpp::obtain(&super::cache::root()?)?;
        let total = (SLOTS * SLOT_CONTEXT).to_string();
        let args = ["--embedding", "-c", &total, "-np", &slots, "-t", &threads];
        let mut server = Server::llama(llama.server(), &model_path, &args)?;
        let result = measure(&server, options.rounds)?;
        server.stop();
        Some(result)
    };
    println!("| server | texts/s | prompt tok/s |\n|---|---:|---:|");
    println!("| rinfer serve | {:.1} | {:.0} |", ours.0, ours.1);
    if let Some((texts_s, tok_s)) = theirs {
        println!("| llama-server --embedding | {texts_s:.1} | {tok_s:.0} |");
    }
    println!(
        "\n{} (`{}`), requests of {TEXTS} short texts, {} rounds after a warm-up, {SLOTS} slots \
         of {SLOT_CONTEXT} positions, {} threads.",
        options.model,
        model_path.display(),
        options.rounds,
        options.threads
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_texts_of_a_request_all_differ() {
        let texts = texts();
        let distinct: std::collections::BTreeSet<_> = texts.iter().collect();
        assert_eq!(distinct.len(), TEXTS);
    }
}
