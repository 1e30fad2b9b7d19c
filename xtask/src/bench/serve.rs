//! `cargo xtask bench serve`: `rinfer serve` (release build, default model) under 1, 4 and 16
//! concurrent streaming clients, and with `--vs-llama-cpp` llama.cpp's `llama-server` (built as
//! the model bench builds llama-bench) with as many slots, the same model, context and threads,
//! measured after rinfer. Reports aggregate generated tokens per second, its ratio to the
//! single-stream rate, and p50/p99 inter-token latency as clients see it (gaps between
//! consecutive SSE chunks of one stream).
//!
//! End-of-generation tokens (read from the model file) get a `logit_bias` of -100 so that every
//! request generates exactly
//! `--max-tokens`; sampling is greedy. Each level runs `ROUNDS` requests per client back to back
//! after one warm-up request per client.

use std::io::BufRead;
use std::net::SocketAddr;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::args::for_each_option;
use super::llama_cpp::LlamaCpp;
use super::model_vocab::ModelVocab;
use super::server::{Server, post};

/// Requests per client at each level, after the warm-up.
const ROUNDS: usize = 2;
/// The prompt every client sends (about 40 tokens).
const PROMPT: &str = "Write a long story about a lighthouse keeper who finds a message in a \
                      bottle. Describe the sea, the weather, the keeper's daily routine and \
                      what the message says.";

struct Options {
    streams: Vec<usize>,
    /// The `logit_bias` object that bans the model's end-of-generation tokens, as JSON.
    ban_end_of_generation: String,
    max_tokens: usize,
    threads: usize,
    vs_llama_cpp: bool,
}

fn parse(args: &[&str]) -> Result<Options> {
    let mut options = Options {
        streams: vec![1, 4, 16],
        ban_end_of_generation: "{}".into(),
        max_tokens: 64,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        vs_llama_cpp: false,
    };
    for_each_option(args, &["--vs-llama-cpp"], |arg, value| {
        match (arg, value) {
            ("--vs-llama-cpp", _) => options.vs_llama_cpp = true,
            ("--streams", Some(value)) => {
                options.streams = value
                    .split(',')
                    .map(|s| s.parse().with_context(|| format!("bad stream count {s:?}")))
                    .collect::<Result<_>>()?;
            }
            ("--max-tokens", Some(value)) => {
                options.max_tokens = value.parse().context("bad --max-tokens")?;
            }
            ("--threads", Some(value)) => {
                options.threads = value.parse().context("bad --threads")?
            }
            (other, _) => bail!("unknown option {other}; see `cargo xtask help`"),
        }
        Ok(())
    })?;
    if options.streams.is_empty() || options.streams.contains(&0) {
        bail!("--streams needs positive counts");
    }
    Ok(options)
}

/// Runs the benchmark (or, with `--multi-turn`, the multi-turn chat scenario) and prints a
/// Markdown table.
pub fn run(args: &[&str]) -> Result<()> {
    if let Some((&"--multi-turn", rest)) = args.split_first() {
        return super::multi_turn::run(rest);
    }
    if let Some((&"--embeddings", rest)) = args.split_first() {
        return super::embeddings::run(rest);
    }
    let mut options = parse(args)?;
    let model = crate::fetch_model::run()?;
    options.ban_end_of_generation = ModelVocab::read(&model)?
        .ban_end_of_generation()
        .to_string();
    crate::cargo(&["build", "--release", "-p", "rinfer-cli"])?;
    let most = options.streams.iter().copied().max().unwrap_or(1);
    let slot_context = 256 + options.max_tokens;
    let (context, slots, threads) = (
        slot_context.to_string(),
        most.to_string(),
        options.threads.to_string(),
    );
    let mut server = Server::rinfer(&["--parallel", &slots, "--ctx", &context, "-t", &threads])?;
    let ours = measure_levels("rinfer", &server, &options)?;
    server.stop();
    let theirs = if options.vs_llama_cpp {
        let llama = LlamaCpp::obtain(&super::cache::root()?)?;
        let total = (slot_context * most).to_string();
        let args = ["-c", &total, "-np", &slots, "-t", &threads];
        let mut server = Server::llama(llama.server(), &model, &args)?;
        let levels = measure_levels("llama-server", &server, &options)?;
        server.stop();
        Some(levels)
    } else {
        None
    };
    print_table("rinfer serve", &ours, None);
    if let Some(theirs) = &theirs {
        println!();
        print_table("llama-server", theirs, None);
        println!();
        print_table("rinfer / llama-server", &ours, Some(theirs));
    }
    println!(
        "\n`rinfer serve --parallel {most}`{}, default model, {} tokens per request, greedy, {} \
         requests per stream after a warm-up; {} threads.",
        if theirs.is_some() {
            format!(" and `llama-server -np {most}`")
        } else {
            String::new()
        },
        options.max_tokens,
        ROUNDS,
        options.threads
    );
    Ok(())
}

/// Every level of `options` against one server.
fn measure_levels(name: &str, server: &Server, options: &Options) -> Result<Vec<(usize, Level)>> {
    let mut rows = Vec::new();
    for &streams in &options.streams {
        let level = measure(server.addr, streams, options)?;
        eprintln!(
            "{name}: {streams:>3} streams: {:.1} tok/s, inter-token p50 {:.1} ms, p99 {:.1} ms",
            level.tok_s,
            level.p50 * 1e3,
            level.p99 * 1e3
        );
        rows.push((streams, level));
    }
    Ok(rows)
}

/// One server's levels as a Markdown table, or (with `peer`) the ratios of each column.
fn print_table(title: &str, rows: &[(usize, Level)], peer: Option<&[(usize, Level)]>) {
    let single = rows
        .iter()
        .find(|(s, _)| *s == 1)
        .map_or(rows[0].1.tok_s, |(_, l)| l.tok_s);
    println!("{title}\n");
    match peer {
        None => {
            println!(
                "| streams | generated tok/s | vs 1 stream | inter-token p50 | inter-token p99 |\n\
                 |---:|---:|---:|---:|---:|"
            );
            for (streams, level) in rows {
                println!(
                    "| {streams} | {:.1} | {:.2}× | {:.1} ms | {:.1} ms |",
                    level.tok_s,
                    level.tok_s / single,
                    level.p50 * 1e3,
                    level.p99 * 1e3
                );
            }
        }
        Some(peer) => {
            println!(
                "| streams | generated tok/s | inter-token p50 | inter-token p99 |\n\
                 |---:|---:|---:|---:|"
            );
            for ((streams, ours), (_, theirs)) in rows.iter().zip(peer) {
                println!(
                    "| {streams} | {:.2}× | {:.2}× | {:.2}× |",
                    ours.tok_s / theirs.tok_s,
                    ours.p50 / theirs.p50,
                    ours.p99 / theirs.p99
                );
            }
        }
    }
}

/// One level's results.
struct Level {
    tok_s: f64,
    p50: f64,
    p99: f64,
}

/// One streamed request: tokens generated and the gaps between its chunks (seconds).
fn stream_once(addr: SocketAddr, options: &Options) -> Result<(usize, Vec<f64>)> {
    let (max_tokens, bias) = (options.max_tokens, &options.ban_end_of_generation);
    let body = format!(
        "{{\"prompt\": \"{PROMPT}\", \"max_tokens\": {max_tokens}, \"temperature\": 0, \
         \"stream\": true, \"logit_bias\": {bias}}}"
    );
    let reader = post(addr, "/v1/completions", &body)?;
    let mut gaps = Vec::with_capacity(max_tokens);
    let mut last: Option<Instant> = None;
    let mut chunks = 0;
    let mut status_ok = false;
    for line in reader.lines() {
        let line = line?;
        if line.starts_with("HTTP/1.1 ") {
            status_ok = line.contains(" 200 ");
        }
        // Every chunk with text is one token (no stop strings, no logprobs); rinfer ends with
        // an empty chunk, llama-server may carry the last token in its final one.
        if line.starts_with("data: {") && !line.contains("\"text\":\"\"") {
            let now = Instant::now();
            if let Some(previous) = last.replace(now) {
                gaps.push((now - previous).as_secs_f64());
            }
            chunks += 1;
        }
        if line.starts_with("data: [DONE]") {
            break;
        }
    }
    if !status_ok {
        bail!("a benchmark request failed");
    }
    Ok((chunks, gaps))
}

fn measure(addr: SocketAddr, streams: usize, options: &Options) -> Result<Level> {
    let max_tokens = options.max_tokens;
    let run_clients = |rounds: usize| -> Result<(usize, Vec<f64>, f64)> {
        let start = Instant::now();
        let results: Vec<Result<(usize, Vec<f64>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..streams)
                .map(|_| {
                    scope.spawn(move || {
                        let mut tokens = 0;
                        let mut gaps = Vec::new();
                        for _ in 0..rounds {
                            let (t, g) = stream_once(addr, options)?;
                            tokens += t;
                            gaps.extend(g);
                        }
                        Ok((tokens, gaps))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| bail!("a client thread panicked"))
                })
                .collect()
        });
        let elapsed = start.elapsed().as_secs_f64();
        let mut tokens = 0;
        let mut gaps = Vec::new();
        for result in results {
            let (t, g) = result?;
            tokens += t;
            gaps.extend(g);
        }
        Ok((tokens, gaps, elapsed))
    };
    run_clients(1)?;
    let (chunks, mut gaps, elapsed) = run_clients(ROUNDS)?;
    // Every request generates `max_tokens` (end-of-generation is banned); a token whose text
    // is an incomplete character arrives in no chunk of its own, so chunks may count fewer.
    let tokens = streams * ROUNDS * max_tokens;
    if chunks > tokens || chunks * 10 < tokens * 9 {
        bail!("expected {tokens} generated tokens, counted {chunks} chunks with text");
    }
    gaps.sort_by(f64::total_cmp);
    let quantile = |q: f64| gaps[((gaps.len() - 1) as f64 * q).round() as usize];
    Ok(Level {
        tok_s: tokens as f64 / elapsed,
        p50: quantile(0.5),
        p99: quantile(0.99),
    })
}
