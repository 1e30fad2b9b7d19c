//! The `rinfer` binary as users run it: exit codes, one-line errors, JSON outputs.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn rinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(args)
        .output()
        .expect("the rinfer binary runs")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "rinfer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn path(relative: &str) -> String {
    fixtures().join(relative).display().to_string()
}

#[test]
fn every_broken_file_exits_with_status_1_and_a_one_line_error() {
    for entry in std::fs::read_dir(fixtures().join("models/broken")).unwrap() {
        let file = entry.unwrap().path();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".gguf") || name == "minimal_valid.gguf" {
            continue;
        }
        let out = rinfer(&["inspect", &file.display().to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
    }
}

#[test]
fn tokenize_works_on_a_vocabulary_only_file() {
    let vocab = path("tokenizer/ggml-vocab-llama-spm.gguf");
    let out = json_of(&rinfer(&[
        "tokenize",
        "--model",
        &vocab,
        "ied 4 ½ months",
        "--json",
    ]));
    // llama.cpp's vector for this text, after the BOS the vocabulary adds.
    let expected = [1, 474, 287, 29871, 29946, 29871, 30226, 7378];
    let tokens: Vec<u64> = out["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    assert_eq!(tokens, expected);
}

#[test]
fn logits_reports_every_position() {
    let model = path("models/llama-tiny-q8_0.gguf");
    let out = json_of(&rinfer(&[
        "logits",
        "--model",
        &model,
        "--tokens",
        "1,15,27,300",
        "--top-k",
        "3",
    ]));
    assert_eq!(out["tokens"].as_array().unwrap().len(), 4);
    let positions = out["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 4);
    for position in positions {
        let top = position["top"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        assert_eq!(top[0][0], position["argmax"]);
        assert!(position["lse"].as_f64().unwrap() >= top[0][1].as_f64().unwrap());
    }
}

#[test]
fn run_json_reports_tokens_text_and_timings() {
    let model = path("models/gemma3-tiny-q4_k_m.gguf");
    let out = json_of(&rinfer(&[
        "run",
        "--model",
        &model,
        "Hello there",
        "-n",
        "5",
        "--seed",
        "3",
        "--json",
    ]));
    assert!(out["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(out["tokens"].as_array().unwrap().len() <= 5);
    assert!(out["text"].is_string());
    for key in ["load_s", "prefill_tok_s", "decode_tok_s"] {
        assert!(out["timings"][key].is_number(), "{key}");
    }
}

#[test]
fn the_same_seed_gives_the_same_text() {
    let model = path("models/gemma3-tiny-q4_k_m.gguf");
    let args = [
        "run",
        "--model",
        &model,
        "Once upon",
        "-n",
        "12",
        "--seed",
        "42",
        "--temperature",
        "1.0",
        "--json",
    ];
    assert_eq!(
        json_of(&rinfer(&args))["tokens"],
        json_of(&rinfer(&args))["tokens"]
    );
}

#[test]
fn a_prompt_beyond_the_context_is_refused_before_any_work() {
    let model = path("models/gemma3-tiny-q4_k_m.gguf");
    let out = rinfer(&[
        "run",
        "--model",
        &model,
        "one two three four five six",
        "-n",
        "64",
        "--ctx",
        "16",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("context"), "{stderr}");
}

#[test]
fn a_file_without_weights_is_a_clear_error() {
    let vocab = path("tokenizer/ggml-vocab-gpt-2.gguf");
    let out = rinfer(&["run", "--model", &vocab, "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("token_embd.weight"), "{stderr}");
}
