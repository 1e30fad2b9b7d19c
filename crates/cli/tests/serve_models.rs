//! `rinfer serve --model NAME=MODEL --model MODEL --models-dir DIR`: the models the command
//! line names load at start, a directory's on first use, each answering by its name under
//! every API; a model that cannot load fails its requests, with the cause in the log.
//! The rest of serving several models is tested in `crates/serve/tests/models.rs`.

mod serve_support;

use std::path::{Path, PathBuf};

use serde_json::json;
use serve_support::{Server, expect_model_states, model_states, models_dir, tiny_model};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
        .display()
        .to_string()
}

fn complete(s: &Server, model: &str) -> serve_support::Response {
    s.post(
        "/v1/completions",
        &json!({"model": model, "prompt": "Hello", "max_tokens": 3, "temperature": 0}),
    )
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn two_models_from_start_and_a_third_on_demand_answer_by_name() {
    let dir = models_dir("three-models", &[]);
    std::fs::copy(fixture("llama-tiny-q4_k.gguf"), dir.join("llama.gguf")).unwrap();
    std::fs::copy(fixture("broken/bad_magic.gguf"), dir.join("broken.gguf")).unwrap();
    let gemma = format!("gemma={}", tiny_model());
    let qwen = fixture("qwen2-tiny-q4_k_m.gguf");
    let dir_arg = arg(&dir);
    let s = Server::start(&[
        "--model",
        &gemma,
        "--model",
        &qwen,
        "--models-dir",
        &dir_arg,
        "--threads",
        "2",
        "--kv-cache-mib",
        "0",
    ]);
    // Healthy once both models of --model are loaded; the directory's waits for a request.
    expect_model_states(
        s.addr,
        &[
            ("gemma", "loaded"),
            ("qwen2-tiny-q4_k_m", "loaded"),
            ("broken", "unloaded"),
            ("llama", "unloaded"),
        ],
    );
    let health = s.get("/health").json();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["models"]["llama"], "unloaded");
    assert_eq!(health["models"]["gemma"], "loaded");

    for model in ["gemma", "qwen2-tiny-q4_k_m"] {
        let r = complete(&s, model);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["model"], model);
    }
    // A request that names no model goes to the first.
    let r = s.post("/v1/completions", &json!({"prompt": "Hi", "max_tokens": 2}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "gemma");

    // The third loads on the first request that names it.
    let r = complete(&s, "llama");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "llama");
    expect_model_states(
        s.addr,
        &[
            ("gemma", "loaded"),
            ("qwen2-tiny-q4_k_m", "loaded"),
            ("broken", "unloaded"),
            ("llama", "loaded"),
        ],
    );
    let listed = s.get("/v1/models").json();
    let llama = &listed["data"][3];
    assert_eq!(llama["context_length"], 2048);
    assert!(
        llama["memory_bytes"].as_u64().unwrap() > 1_000_000,
        "{llama}"
    );
    // Every API finds its model by name (the chat ones on the model with a chat template).
    let chat = json!({"model": "gemma", "messages": [{"role": "user", "content": "Hi"}],
                      "max_tokens": 3});
    for path in ["/v1/chat/completions", "/v1/messages"] {
        let r = s.post(path, &chat);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.json()["model"], "gemma");
    }
    let r = s.post(
        "/v1/responses",
        &json!({"model": "gemma", "input": "Hi", "max_output_tokens": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "gemma");
    let r = s.post("/tokenize", &json!({"model": "llama", "content": "Hi"}));
    assert_eq!(r.status, 200, "{}", r.text());

    // A model that cannot be loaded fails its requests (the cause in the log, not the
    // answer), stays unloaded, and the others still answer.
    let r = complete(&s, "broken");
    assert_eq!(r.status, 500, "{}", r.text());
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("`broken` cannot be loaded"), "{message}");
    assert!(!message.contains(&dir_arg), "{message}");
    s.wait_for_log("cannot load the model");
    assert_eq!(
        model_states(s.addr)[2],
        ("broken".to_string(), "unloaded".to_string())
    );
    assert_eq!(complete(&s, "gemma").status, 200);
    std::fs::remove_dir_all(&dir).unwrap();
}
