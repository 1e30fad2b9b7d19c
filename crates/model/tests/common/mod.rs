//! Paths shared by the model crate's integration tests.

#![allow(dead_code)]

use std::path::PathBuf;

use rinfer_model::{KvCache, Logits, Model, Scratch};

/// The repository's `tests/fixtures`.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The tiny fixture models with llama.cpp references, one per architecture and tensor-type mix.
pub const FIXTURE_MODELS: [&str; 8] = [
    "gemma3-tiny-f32",
    "gemma3-tiny-q4_k_m",
    "gpt2-tiny-q2_k",
    "llama-tiny-q4_k",
    "llama-tiny-q8_0",
    "phi2-tiny-q3_k_m",
    "qwen2-tiny-q4_k_m",
    "qwen3-tiny-q5_k_m",
];

/// The default model as `rinfer fetch` / `cargo xtask fetch-model` caches it.
///
/// # Panics
/// When it has not been fetched, naming the command that fetches it.
pub fn default_model() -> PathBuf {
    let home = std::env::var_os("RINFER_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/rinfer")
        });
    let path = home.join("models/gemma-3-270m-q4_k_m.gguf");
    assert!(
        path.exists(),
        "{} is missing: run `cargo xtask fetch-model` first (`cargo xtask test` does)",
        path.display()
    );
    path
}

/// A fixture model.
pub fn fixture_model(name: &str) -> Model {
    Model::open_gguf(fixtures().join(format!("models/{name}.gguf")))
        .unwrap()
        .0
}

/// The token ids of every case of a model's reference file.
pub fn reference_prompts(name: &str) -> Vec<Vec<u32>> {
    let path = fixtures().join(format!("refs/{name}.json"));
    let refs: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    refs["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            case["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

/// Logits of every position of `tokens`, evaluated in one batch.
pub fn batched_logits(model: &Model, tokens: &[u32]) -> Vec<f32> {
    let n = tokens.len();
    let mut cache = KvCache::new(&model.config, n, n);
    let mut scratch = Scratch::new(&model.config, n);
    model
        .forward(tokens, &mut cache, &mut scratch, Logits::All)
        .unwrap()
        .to_vec()
}

/// Bit patterns, so that comparisons are exact (and NaN-safe).
pub fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}
