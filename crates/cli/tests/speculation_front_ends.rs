//! Speculative decoding through the front ends, on a tiny fixture model: `rinfer run
//! --speculate ngram` prints the text of a plain run and reports the guesses it kept, and
//! `rinfer serve --speculate ngram` answers a request the same with speculation or without
//! (`"speculate": false`), counting guesses at `/metrics`.

mod serve_support;

use std::process::Command;

use serde_json::{Value, json};
use serve_support::{Server, tiny_model};

/// A prompt whose continuation repeats it, so prompt lookup has something to find.
const PROMPT: &str = "one two three four one two three four one two three four one two";

/// `rinfer run --json` greedy with `extra` flags: its report.
fn run(extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(["run", "--model", &tiny_model(), PROMPT, "--json"])
        .args([
            "-n",
            "60",
            "--ignore-eos",
            "--temperature",
            "0",
            "--threads",
            "2",
        ])
        .args(extra)
        .output()
        .expect("the rinfer binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn run_with_prompt_lookup_prints_the_text_of_a_plain_run_and_keeps_guesses() {
    let plain = run(&["--speculate", "off"]);
    let fast = run(&["--speculate", "ngram", "--draft-max", "6"]);
    assert_eq!(fast["tokens"], plain["tokens"]);
    assert_eq!(fast["text"], plain["text"]);
    assert_eq!(plain["timings"]["drafted_tokens"], 0);
    let accepted = fast["timings"]["accepted_tokens"].as_u64().unwrap();
    assert!(accepted > 0, "{}", fast["timings"]);
}

#[test]
fn a_speculating_server_answers_as_a_plain_one_and_counts_guesses() {
    let model = tiny_model();
    let s = Server::start(&[
        "--model",
        &model,
        "--threads",
        "2",
        "--ctx",
        "512",
        "--speculate",
        "ngram",
    ]);
    let body = |speculate: bool| {
        json!({"prompt": PROMPT, "max_tokens": 60, "temperature": 0.7, "seed": 9,
               "logit_bias": {"1": -100, "106": -100}, "speculate": speculate})
    };
    let opted_out = s.post("/v1/completions", &body(false)).json();
    assert_eq!(s.metric("rinfer_speculation_drafted_tokens_total"), 0.0);
    let fast = s.post("/v1/completions", &body(true)).json();
    assert_eq!(fast["choices"][0]["text"], opted_out["choices"][0]["text"]);
    assert!(s.metric("rinfer_speculation_drafted_tokens_total") > 0.0);
    let rate = s.metric("rinfer_speculation_acceptance_rate");
    assert!((0.0..=1.0).contains(&rate), "{rate}");
}
