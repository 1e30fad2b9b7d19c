//! Embedding models against llama.cpp's pooled embeddings (`refs/<model>.embeddings.json`):
//! BERT (bidirectional, post-norm, MEAN pooling, WordPiece), nomic-bert (BERT's block with
//! NEOX rotary positions, a fused `attn_qkv` and a SwiGLU FFN) and a Qwen3 embedder (LAST
//! pooling, an end token appended), F32 and Q8_0, through the engine, alone and batched.

mod common;
#[path = "../../../tests/support/embedding_cases.rs"]
mod embedding_cases;

use common::{embed_alone_and_batched, f32_kv_settings, fixtures};
use embedding_cases::{EmbeddingCase, cosine, embedding_cases};
use rinfer_model::engine::normalize;
use rinfer_model::{DeviceRequest, Engine, Event, LoadedModel, Request, SamplingParams};

/// The embedding fixtures with the least cosine and the largest per-component difference of
/// the normalised vectors allowed (fixtures README §3.4).
const MODELS: [(&str, f64, f64); 6] = [
    ("bert-embd-tiny-f32", 0.99999, 1e-3),
    ("bert-embd-tiny-q8_0", 0.999, 0.02),
    ("nomic-bert-embd-tiny-f32", 0.99999, 1e-4),
    ("nomic-bert-embd-tiny-q8_0", 0.999, 0.02),
    ("qwen3-embd-tiny-f32", 0.99999, 1e-3),
    ("qwen3-embd-tiny-q8_0", 0.999, 0.02),
];

fn cases(name: &str) -> Vec<EmbeddingCase> {
    embedding_cases(fixtures().join(format!("refs/{name}.embeddings.json")))
}

fn loaded(name: &str) -> LoadedModel {
    LoadedModel::open(fixtures().join(format!("models/{name}.gguf"))).unwrap()
}

#[test]
fn texts_tokenize_as_llama_cpp_with_its_special_tokens() {
    for (name, _, _) in MODELS {
        let loaded = loaded(name);
        for case in cases(name) {
            let tokens = loaded.tokenizer.encode(&case.prompt, true, false).unwrap();
            assert_eq!(tokens, case.tokens, "{name}: {:?}", case.prompt);
        }
    }
}

#[test]
fn pooled_embeddings_match_llama_cpp_alone_and_batched() {
    for (name, min_cosine, max_diff) in MODELS {
        let loaded = loaded(name);
        let cases = cases(name);
        let prompts: Vec<Vec<u32>> = cases.iter().map(|c| c.tokens.clone()).collect();
        let batched = embed_alone_and_batched(&loaded, f32_kv_settings, &prompts, name);
        for (case, mut ours) in cases.iter().zip(batched) {
            normalize(&mut ours);
            let ours: Vec<f64> = ours.iter().map(|&x| f64::from(x)).collect();
            let cos = cosine(&ours, &case.embedding);
            let diff = ours
                .iter()
                .zip(&case.embedding)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                cos >= min_cosine && diff <= max_diff,
                "{name} {:?}: cosine {cos}, largest difference {diff}",
                &case.prompt[..20]
            );
        }
    }
}

/// A pass of many sequences hands its per-row work (norms, biases, activations) to the pool
/// where a pass of one does not; every embedding keeps its bits.
#[test]
fn embeddings_in_a_full_batch_keep_the_bits_they_have_alone() {
    for name in ["bert-embd-tiny-f32", "nomic-bert-embd-tiny-q8_0"] {
        let loaded = loaded(name);
        let prompts: Vec<Vec<u32>> = cases(name)
            .iter()
            .map(|c| c.tokens.clone())
            .cycle()
            .take(16)
            .collect();
        embed_alone_and_batched(&loaded, f32_kv_settings, &prompts, name);
    }
}

#[test]
fn an_embedding_runs_beside_a_generation_without_changing_either() {
    let loaded = loaded("qwen3-embd-tiny-f32");
    let case = &cases("qwen3-embd-tiny-f32")[0];
    let generation = || Request::new(vec![1, 2, 3, 4], 6).with_sampling(SamplingParams::greedy());
    let mut engine = Engine::new(&loaded, f32_kv_settings(2), DeviceRequest::Cpu).unwrap();
    let alone = engine.generate(generation(), |_| {}).unwrap().tokens;
    let embedding_alone = engine.embed(std::slice::from_ref(&case.tokens)).unwrap();

    let mut engine = Engine::new(&loaded, f32_kv_settings(2), DeviceRequest::Cpu).unwrap();
    let generating = engine.add(generation()).unwrap();
    engine.step(|_| {});
    let embedding = engine.add(Request::embedding(case.tokens.clone())).unwrap();
    let (mut tokens, mut pooled) = (Vec::new(), None);
    while engine.is_busy() {
        engine.step(|event| match event {
            Event::Token { id, token, .. } if id == generating => tokens.push(token),
            Event::Embedding { id, embedding: e } if id == embedding => pooled = Some(e),
            _ => {}
        });
    }
    assert_eq!(Some(embedding_alone[0].clone()), pooled);
    // The first token came out of the step before the embedding was added.
    assert_eq!(alone[1..], tokens[..]);
}

#[test]
fn generation_models_refuse_embeddings_and_encoders_refuse_generation() {
    let lm = LoadedModel::open(fixtures().join("models/qwen3-tiny-q5_k_m.gguf")).unwrap();
    let engine = Engine::new(&lm, f32_kv_settings(1), DeviceRequest::Cpu).unwrap();
    let err = engine
        .validate(&Request::embedding(vec![1, 2]))
        .unwrap_err();
    assert!(err.to_string().contains("not an embedding model"), "{err}");

    let bert = loaded("bert-embd-tiny-f32");
    let engine = Engine::new(&bert, f32_kv_settings(1), DeviceRequest::Cpu).unwrap();
    let err = engine
        .validate(&Request::new(vec![101, 102], 4))
        .unwrap_err();
    assert!(err.to_string().contains("encoder"), "{err}");
    let too_long = Request::embedding(vec![101; 600]);
    let err = engine.validate(&too_long).unwrap_err();
    assert!(err.to_string().contains("at most"), "{err}");
}
