//! llama.cpp's embeddings of the fixture models (`tests/fixtures/refs/MODEL.embeddings.json`)
//! and the cosine they are compared by, shared by the tests of each front end that embeds
//! (included by path).

// Each test file uses its own part.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

/// One reference case of a fixture.
pub struct EmbeddingCase {
    /// The text embedded.
    pub prompt: String,
    /// Its tokens.
    pub tokens: Vec<u32>,
    /// llama.cpp's embedding of it, normalised.
    pub embedding: Vec<f64>,
}

/// The reference cases in the file at `path`.
pub fn embedding_cases(path: impl AsRef<Path>) -> Vec<EmbeddingCase> {
    let refs: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let numbers = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    refs["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| EmbeddingCase {
            prompt: c["prompt"].as_str().unwrap().to_string(),
            tokens: numbers(&c["tokens"]).iter().map(|&t| t as u32).collect(),
            embedding: numbers(&c["embedding"]),
        })
        .collect()
}

/// The cosine of the angle between `a` and `b`.
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}
