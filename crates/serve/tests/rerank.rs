//! `/v1/rerank` on the server: Jina's and Cohere's shape with llama-server's scores (the
//! fixtures' `rerank/<model>.rerank.json`), its aliases, `top_n` and `return_documents`, the
//! errors of a malformed or oversized request, a model that does not rerank, and a reranker
//! asked for embeddings.

mod support;

use rinfer_model::KvType;
use serde_json::{Value, json};
use support::{Server, config, fixture};

/// A server of `path` with an F32 KV cache, as the references were computed.
fn serve(path: &str) -> Server {
    let mut config = config(&fixture(path), 512);
    config.engine.threads = Some(2);
    config.engine.kv_type = Some(KvType::F32);
    Server::start(config)
}

fn refs(model: &str) -> Value {
    let path = fixture(&format!("rerank/{model}.rerank.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `(index, score)` of each result.
fn ranking(body: &Value) -> Vec<(u64, f64)> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["relevance_score"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn rerank_answers_in_jina_shape_with_llama_cpp_scores_on_every_path() {
    // BERT's scores differ from llama.cpp's by its f16-table GELU (see the model crate's
    // reference_rerank test); Qwen3's by float rounding.
    for (model, tolerance) in [("bert-rank-tiny-f32", 1e-3), ("qwen3-rank-tiny-f32", 1e-5)] {
        let s = serve(&format!("rerank/{model}.gguf"));
        for (case, path) in refs(model)["cases"]
            .as_array()
            .unwrap()
            .iter()
            .zip(["/v1/rerank", "/rerank"])
        {
            let body = json!({
                "model": model,
                "query": case["query"],
                "documents": case["documents"],
            });
            let r = s.post(path, &body);
            assert_eq!(r.status, 200, "{}", r.text());
            let ours = r.json();
            let want = &case["answer"];
            assert_eq!(ours["object"], "list");
            assert_eq!(ours["model"], model);
            assert_eq!(ours["usage"], want["usage"]);
            let (ours, want) = (ranking(&ours), ranking(want));
            assert_eq!(ours.len(), want.len());
            for ((i, a), (j, b)) in ours.iter().zip(&want) {
                assert_eq!(i, j, "{model}: another ranking");
                assert!(
                    (a - b).abs() <= tolerance * b.abs(),
                    "{model} {i}: {a} against {b}"
                );
            }
        }
    }
}

#[test]
fn top_n_cuts_and_return_documents_carries_the_texts() {
    let s = serve("rerank/bert-rank-tiny-f32.gguf");
    let case = &refs("bert-rank-tiny-f32")["cases"][0];
    let documents = case["documents"].as_array().unwrap();
    let objects: Vec<Value> = documents.iter().map(|d| json!({"text": d})).collect();
    let r = s.post(
        "/v1/reranking",
        &json!({
            "query": case["query"],
            "documents": objects,
            "top_n": 2,
            "return_documents": true,
        }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(body["model"], "bert-rank-tiny-f32");
    for result in results {
        let index = result["index"].as_u64().unwrap() as usize;
        assert_eq!(result["document"]["text"], documents[index]);
    }
    let best = case["answer"]["results"][0]["index"].clone();
    assert_eq!(results[0]["index"], best);
    // A top_n beyond the documents keeps them all.
    let r = s.post(
        "/rerank",
        &json!({"query": "q", "documents": ["a", "b"], "top_n": 10}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["results"].as_array().unwrap().len(), 2);
    assert!(r.json()["results"][0].get("document").is_none());
    // More documents than the server's queue (64) go in a window at a time.
    let many: Vec<String> = (0..100).map(|i| format!("document {i}")).collect();
    let r = s.post("/v1/rerank", &json!({"query": "q", "documents": many}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["results"].as_array().unwrap().len(), 100);
}

#[test]
fn malformed_or_oversized_rerank_requests_get_400_naming_the_field() {
    let s = serve("rerank/bert-rank-tiny-f32.gguf");
    let many: Vec<String> = (0..1025).map(|i| format!("d{i}")).collect();
    let bad = [
        (json!({"documents": ["a"]}), "query", "required"),
        (json!({"query": 1, "documents": ["a"]}), "query", ""),
        (json!({"query": "q"}), "documents", "required"),
        (json!({"query": "q", "documents": []}), "documents", "empty"),
        (json!({"query": "q", "documents": "a"}), "documents", ""),
        (
            json!({"query": "q", "documents": ["a", 1]}),
            "documents",
            "document 1",
        ),
        (
            json!({"query": "q", "documents": [{"txt": "a"}]}),
            "documents",
            "document 0",
        ),
        (
            json!({"query": "q", "documents": ["a"], "top_n": 0}),
            "top_n",
            "at least 1",
        ),
        (
            json!({"query": "q", "documents": ["a"], "top_n": -1}),
            "top_n",
            "",
        ),
        (
            json!({"query": "q", "documents": ["a"], "rank_fields": []}),
            "rank_fields",
            "",
        ),
        (
            json!({"query": "q", "documents": ["a ".repeat(600)]}),
            "documents",
            "per pair",
        ),
        (
            json!({"query": "q", "documents": many}),
            "documents",
            "1025 documents",
        ),
        // Over the text bound: the query counts once per document.
        (
            json!({"query": "q".repeat(1 << 20), "documents": vec!["d"; 5]}),
            "documents",
            "bytes of text",
        ),
        // Over the token bound, each pair within one pass.
        (
            json!({"query": "q ".repeat(240), "documents": vec!["d ".repeat(250); 540]}),
            "documents",
            "more than the 262144",
        ),
    ];
    for (body, param, message) in bad {
        let r = s.post("/v1/rerank", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(r.error_param().as_deref(), Some(param), "{body}");
        assert!(r.text().contains(message), "{}", r.text());
    }
    let r = s.post(
        "/v1/rerank",
        &json!({"query": "q", "documents": ["a"], "model": "another"}),
    );
    assert_eq!(r.status, 404, "{}", r.text());
    // A reranker has no embeddings.
    let r = s.post("/v1/embeddings", &json!({"input": "hello"}));
    r.assert_error(400, "model", "/v1/rerank");
}

#[test]
fn a_model_that_is_not_a_reranker_refuses_rerank() {
    for model in [
        "models/bert-embd-tiny-f32.gguf",
        "models/qwen3-tiny-q5_k_m.gguf",
    ] {
        let s = serve(model);
        let r = s.post("/v1/rerank", &json!({"query": "q", "documents": ["a"]}));
        r.assert_error(400, "model", "not a reranker");
    }
}
