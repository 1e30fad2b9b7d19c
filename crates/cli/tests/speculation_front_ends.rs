//! Speculative decoding through the front ends, on tiny fixture models: `rinfer run
//! --speculate ngram` and `--speculate draft --draft-model` (a quantized fixture guessing for
//! its F32 sibling) print the text of a plain run and report the guesses they kept; a draft
//! flag without its model, a model without the flag, or a draft model of another vocabulary
//! are refused; `rinfer chat` with a draft model answers every turn as a plain chat does; and `rinfer serve --speculate ngram|draft` answers a request the same with
//! speculation or without (`"speculate": false`), counting guesses at `/metrics`.

mod cli_support;
mod serve_support;

use std::process::Output;

use cli_support::{fixture, rinfer, rinfer_with_stdin, succeeded};
use serde_json::{Value, json};
use serve_support::{Server, tiny_model};

/// A prompt whose continuation repeats it, so prompt lookup has something to find.
const PROMPT: &str = "one two three four one two three four one two three four one two";

/// The F32 gemma3 fixture, and its quantized sibling to draft for it.
fn target_and_draft() -> (String, String) {
    (
        fixture("models/gemma3-tiny-f32.gguf"),
        fixture("models/gemma3-tiny-q4_k_m.gguf"),
    )
}

/// `rinfer run --json` of `model`, greedy, with `extra` flags.
fn run_model(model: &str, extra: &[&str]) -> Output {
    let args = [
        "run",
        "--model",
        model,
        PROMPT,
        "--json",
        "-n",
        "60",
        "--ignore-eos",
        "--temperature",
        "0",
        "--threads",
        "2",
    ];
    rinfer(&[&args[..], extra].concat())
}

/// `rinfer run --json` of the tiny model, greedy, with `extra` flags: its report.
fn run(extra: &[&str]) -> Value {
    report(run_model(&tiny_model(), extra))
}

/// The report of a run that succeeded.
fn report(out: Output) -> Value {
    succeeded(&out);
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
fn run_with_a_draft_model_prints_the_text_of_a_plain_run_and_keeps_guesses() {
    let (target, draft) = target_and_draft();
    let plain = report(run_model(&target, &["--speculate", "off"]));
    let flags = [
        "--speculate",
        "draft",
        "--draft-model",
        &draft,
        "--draft-max",
        "4",
    ];
    let fast = report(run_model(&target, &flags));
    assert_eq!(fast["tokens"], plain["tokens"]);
    assert_eq!(fast["text"], plain["text"]);
    let accepted = fast["timings"]["accepted_tokens"].as_u64().unwrap();
    assert!(accepted > 0, "{}", fast["timings"]);
}

/// What `rinfer chat` of `model`, greedy, with `extra` flags, prints for three turns.
fn chat(model: &str, extra: &[&str]) -> String {
    let args = [
        "chat",
        "--model",
        model,
        "-n",
        "24",
        "--temperature",
        "0",
        "--ctx",
        "512",
        "--threads",
        "2",
    ];
    let turns = b"Hello there, how are you today?\nTell me more.\nAnd then?\n";
    let out = rinfer_with_stdin(&[&args[..], extra].concat(), turns);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn chat_with_a_draft_model_answers_every_turn_as_a_plain_chat() {
    let (target, draft) = target_and_draft();
    let plain = chat(&target, &[]);
    assert!(!plain.trim().is_empty());
    let fast = chat(&target, &["--speculate", "draft", "--draft-model", &draft]);
    assert_eq!(fast, plain);
}

#[test]
fn draft_flags_that_disagree_or_a_draft_of_another_vocabulary_are_refused() {
    let refused = |extra: &[&str], says: &str| {
        let out = run_model(&tiny_model(), extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} ran");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    };
    refused(&["--speculate", "draft"], "--draft-model PATH");
    let twin = tiny_model();
    refused(
        &["--speculate", "ngram", "--draft-model", &twin],
        "--speculate draft",
    );
    refused(&["--draft-model", &twin], "--speculate draft");
    let other = fixture("models/llama-tiny-q4_k.gguf");
    refused(
        &["--speculate", "draft", "--draft-model", &other],
        "vocabulary",
    );
}

/// Asserts that the completion `body` sent to `s` with `"speculate": false` drafts nothing,
/// and that sent with `"speculate": true` it gives the same text.
fn speculates_as_opted_out(s: &Server, mut body: Value) {
    body["speculate"] = json!(false);
    let opted_out = s.post("/v1/completions", &body).json();
    assert_eq!(s.metric("rinfer_speculation_drafted_tokens_total"), 0.0);
    body["speculate"] = json!(true);
    let fast = s.post("/v1/completions", &body).json();
    assert_eq!(fast["choices"][0]["text"], opted_out["choices"][0]["text"]);
}

#[test]
fn a_server_with_a_draft_model_answers_as_a_plain_one_and_counts_guesses() {
    let (target, draft) = target_and_draft();
    let s = Server::start(&[
        "--model",
        &target,
        "--threads",
        "2",
        "--ctx",
        "512",
        "--speculate",
        "draft",
        "--draft-model",
        &draft,
    ]);
    let body = json!({"prompt": "a story about", "max_tokens": 40, "temperature": 0.7, "seed": 4,
                      "logit_bias": {"1": -100, "106": -100}});
    speculates_as_opted_out(&s, body);
    assert!(s.metric("rinfer_speculation_accepted_tokens_total") > 0.0);
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
    let body = json!({"prompt": PROMPT, "max_tokens": 60, "temperature": 0.7, "seed": 9,
                      "logit_bias": {"1": -100, "106": -100}});
    speculates_as_opted_out(&s, body);
    assert!(s.metric("rinfer_speculation_drafted_tokens_total") > 0.0);
    let rate = s.metric("rinfer_speculation_acceptance_rate");
    assert!((0.0..=1.0).contains(&rate), "{rate}");
}
