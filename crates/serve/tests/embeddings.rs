//! `/v1/embeddings` on the server: OpenAI's shape for every input form, llama.cpp's
//! vectors (the fixtures' references), base64, `dimensions`, usage, the errors of a
//! malformed request, a model that does not embed, and the official `openai` Python client's
//! `embeddings.create`.

#[path = "../../../tests/support/embedding_cases.rs"]
mod embedding_cases;
mod python_support;
mod support;

use embedding_cases::{cosine, embedding_cases};
use serde_json::{Value, json};
use support::{Server, config, fixture};

fn serve(model: &str) -> Server {
    let mut config = config(&fixture(&format!("models/{model}.gguf")), 512);
    config.engine.threads = Some(2);
    Server::start(config)
}

/// The reference cases (prompt, tokens, normalised embedding) of a fixture.
fn cases(model: &str) -> Vec<(String, Vec<u32>, Vec<f64>)> {
    embedding_cases(fixture(&format!("refs/{model}.embeddings.json")))
        .into_iter()
        .map(|c| (c.prompt, c.tokens, c.embedding))
        .collect()
}

fn vector(item: &Value) -> Vec<f64> {
    item["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn every_input_form_answers_in_the_openai_shape_with_llama_cpp_vectors() {
    let model = "bert-embd-tiny-f32";
    let s = serve(model);
    let cases = cases(model);
    let texts: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    let tokens: Vec<&Vec<u32>> = cases.iter().map(|c| &c.1).collect();
    let total: usize = tokens.iter().map(|t| t.len()).sum();
    for input in [json!(texts), json!(tokens)] {
        let r = s.post("/v1/embeddings", &json!({"model": model, "input": input}));
        assert_eq!(r.status, 200, "{}", r.text());
        let body = r.json();
        assert_eq!(body["object"], "list");
        assert_eq!(body["model"], model);
        assert_eq!(body["usage"]["prompt_tokens"], total);
        assert_eq!(body["usage"]["total_tokens"], total);
        let data = body["data"].as_array().unwrap();
        assert_eq!(data.len(), cases.len());
        for (i, (item, case)) in data.iter().zip(&cases).enumerate() {
            assert_eq!(item["object"], "embedding");
            assert_eq!(item["index"], i);
            let ours = vector(item);
            assert_eq!(ours.len(), 64);
            let cos = cosine(&ours, &case.2);
            assert!(cos >= 0.9999, "case {i}: cosine {cos}");
        }
    }
    // One string, and one token array, are one input each.
    for input in [json!(texts[0]), json!(tokens[0])] {
        let r = s.post("/v1/embeddings", &json!({"input": input}));
        assert_eq!(r.status, 200, "{}", r.text());
        let data = r.json()["data"].as_array().unwrap().clone();
        assert_eq!(data.len(), 1);
        assert!(cosine(&vector(&data[0]), &cases[0].2) >= 0.9999);
    }
}

#[test]
fn base64_and_dimensions_encode_the_same_vector() {
    let s = serve("bert-embd-tiny-f32");
    let floats = s.post("/v1/embeddings", &json!({"input": "a lighthouse"}));
    let floats = vector(&floats.json()["data"][0]);
    let encoded = s.post(
        "/v1/embeddings",
        &json!({"input": "a lighthouse", "encoding_format": "base64"}),
    );
    assert_eq!(encoded.status, 200, "{}", encoded.text());
    let text = encoded.json()["data"][0]["embedding"]
        .as_str()
        .unwrap()
        .to_string();
    let bytes = decode_base64(&text);
    let decoded: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    // The JSON numbers are the shortest text of each f32.
    let floats_f32: Vec<f32> = floats.iter().map(|&x| x as f32).collect();
    assert_eq!(decoded, floats_f32);

    let short = s.post(
        "/v1/embeddings",
        &json!({"input": "a lighthouse", "dimensions": 16}),
    );
    assert_eq!(short.status, 200, "{}", short.text());
    let short = vector(&short.json()["data"][0]);
    assert_eq!(short.len(), 16);
    let norm: f64 = short.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    assert!(cosine(&short, &floats[..16]) > 0.99999);
}

fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|&c| c != b'=') {
        let value = ALPHABET.iter().position(|&a| a == c).unwrap() as u32;
        bits = bits << 6 | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    out
}

#[test]
fn malformed_embedding_requests_get_400_naming_the_field_and_unknown_models_404() {
    let s = serve("bert-embd-tiny-f32");
    let bad = [
        (json!({}), "input"),
        (json!({"input": []}), "input"),
        (json!({"input": ""}), "input"),
        (json!({"input": [[]]}), "input"),
        (json!({"input": [1, "a"]}), "input"),
        (json!({"input": ["a", 1]}), "input"),
        (json!({"input": {"text": "a"}}), "input"),
        (json!({"input": [5000]}), "input"),
        (
            json!({"input": "a", "encoding_format": "int8"}),
            "encoding_format",
        ),
        (json!({"input": "a", "dimensions": 0}), "dimensions"),
        (json!({"input": "a", "dimensions": 65}), "dimensions"),
        (json!({"input": "a", "dimensions": "8"}), "dimensions"),
        (json!({"input": "a", "truncate": true}), "truncate"),
        (json!({"input": "a ".repeat(600)}), "input"),
    ];
    for (body, param) in bad {
        let r = s.post("/v1/embeddings", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(r.error_param().as_deref(), Some(param), "{body}");
    }
    // A model the server does not serve is not found, as on every API.
    let body = json!({"input": "a", "model": "another"});
    let r = s.post("/v1/embeddings", &body);
    assert_eq!(r.status, 404, "{body}: {}", r.text());
    assert_eq!(r.error_param().as_deref(), Some("model"), "{body}");
    // An encoder does not generate.
    let r = s.post(
        "/v1/completions",
        &json!({"prompt": "hello", "max_tokens": 2}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.error_param().as_deref(), Some("model"));
}

#[test]
fn a_model_without_pooling_refuses_embeddings() {
    let s = serve("qwen3-tiny-q5_k_m");
    let r = s.post("/v1/embeddings", &json!({"input": "hello"}));
    r.assert_error(400, "model", "not an embedding model");
}

#[test]
fn the_openai_python_client_creates_embeddings() {
    let python = python_support::python_with(&["openai"], &["openai"]);
    let model = "qwen3-embd-tiny-q8_0";
    let s = serve(model);
    let refs = fixture(&format!("refs/{model}.embeddings.json"));
    let args = [format!("http://{}/v1", s.addr), model.to_string(), refs];
    python_support::run_script(&python, "embeddings_client.py", &args);
}
