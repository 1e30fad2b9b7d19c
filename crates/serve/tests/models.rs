//! The server with several models: each request's `model` picks one, loaded on first use
//! within a memory budget (the least recently used idle model unloaded to make room, never one
//! with requests in flight), each with an engine of its own; `/v1/models` and `/health` say
//! where each is; an unknown model is a 404.

mod support;

use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};

use rinfer_serve::{ServeConfig, models_in_dir};
use serde_json::{Value, json};
use support::{
    Server, config, expect_model_states, model_states, models_dir, next_event, open_stream,
    tiny_model, wait_for,
};

fn complete(s: &Server, model: &str) -> support::Response {
    s.post(
        "/v1/completions",
        &json!({"model": model, "prompt": "Hello", "max_tokens": 3, "temperature": 0}),
    )
}

/// A streamed request to `model` that runs for seconds (4000 tokens, the tiny Gemma's
/// end-of-generation tokens banned; needs a context of 4096), read up to its first token.
fn open_long_stream(addr: SocketAddr, model: &str) -> BufReader<TcpStream> {
    let body = json!({"model": model, "prompt": "a", "max_tokens": 4000, "stream": true,
                      "logit_bias": {"1": -100, "106": -100}})
    .to_string();
    let mut stream = open_stream(addr, &body);
    next_event(&mut stream);
    stream
}

/// The configuration `rinfer serve --models-dir DIR --ctx CTX --threads 2 --kv-cache-mib 0`
/// makes: every model of `dir`, each loaded on first use.
fn models_config(dir: &std::path::Path, ctx: usize) -> ServeConfig {
    let models = models_in_dir(dir).unwrap();
    let mut config = config(&models[0].path.display().to_string(), ctx);
    config.models = models;
    config.engine.threads = Some(2);
    config.engine.kv_cache_mib = Some(0);
    config
}

#[test]
fn an_unknown_model_is_a_404_on_every_api() {
    let mut config = config(&tiny_model(), 512);
    config.engine.threads = Some(2);
    let s = Server::start(config);
    let chat = json!({"model": "nope", "messages": [{"role": "user", "content": "Hi"}]});
    for (path, body) in [
        ("/v1/completions", json!({"model": "nope", "prompt": "Hi"})),
        ("/v1/chat/completions", chat.clone()),
        ("/v1/responses", json!({"model": "nope", "input": "Hi"})),
        ("/tokenize", json!({"model": "nope", "content": "Hi"})),
    ] {
        let r = s.post(path, &body);
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        let error = &r.json()["error"];
        assert_eq!(error["type"], "invalid_request_error", "{path}");
        assert_eq!(error["code"], "model_not_found", "{path}");
        assert_eq!(error["param"], "model", "{path}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("`nope`"), "{message}");
        assert!(message.contains("`gemma3-tiny-q4_k_m`"), "{message}");
    }
    // Anthropic's path answers in its own shape.
    let r = s.post(
        "/v1/messages",
        &json!({"model": "nope", "max_tokens": 3, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["type"], "error");
    // The one model still answers.
    assert_eq!(complete(&s, "gemma3-tiny-q4_k_m").status, 200);
}

#[test]
fn the_least_recently_used_idle_model_is_unloaded_and_one_in_use_never_is() {
    let dir = models_dir("lru", &["a", "b", "c"]);
    let mut config = models_config(&dir, 4096);
    config.engine.sequences = 1;

    // The memory one model needs, as the server estimates it.
    let one = {
        let s = Server::start(config.clone());
        expect_model_states(
            s.addr,
            &[("a", "unloaded"), ("b", "unloaded"), ("c", "unloaded")],
        );
        assert_eq!(complete(&s, "a").status, 200);
        s.get("/v1/models").json()["data"][0]["memory_bytes"]
            .as_u64()
            .unwrap()
    };
    // Room for two.
    config.models_memory_bytes = Some((2 * one).div_ceil(1 << 20) << 20);
    let s = Server::start(config);
    for model in ["a", "b", "a"] {
        assert_eq!(complete(&s, model).status, 200);
    }
    expect_model_states(
        s.addr,
        &[("a", "loaded"), ("b", "loaded"), ("c", "unloaded")],
    );
    // `b` was used least recently: it makes room for `c`.
    assert_eq!(complete(&s, "c").status, 200);
    expect_model_states(
        s.addr,
        &[("a", "loaded"), ("b", "unloaded"), ("c", "loaded")],
    );

    // `c` is in use: `a` makes room for `b`, though `c` was used before it.
    let mut running_c = open_long_stream(s.addr, "c");
    assert_eq!(complete(&s, "a").status, 200);
    assert_eq!(complete(&s, "b").status, 200);
    expect_model_states(
        s.addr,
        &[("a", "unloaded"), ("b", "loaded"), ("c", "loaded")],
    );

    // Both loaded models in use: nothing can make room for `a`.
    let mut running_b = open_long_stream(s.addr, "b");
    let r = complete(&s, "a");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("cannot load `a`"), "{message}");
    assert!(message.contains("in use"), "{message}");
    expect_model_states(
        s.addr,
        &[("a", "unloaded"), ("b", "loaded"), ("c", "loaded")],
    );
    // Both streams still run.
    assert_ne!(next_event(&mut running_b), "[DONE]");
    assert_ne!(next_event(&mut running_c), "[DONE]");

    // Once their clients leave, `a` loads again.
    for stream in [&running_b, &running_c] {
        let _ = stream.get_ref().shutdown(std::net::Shutdown::Both);
    }
    wait_for(|| complete(&s, "a").status == 200);
    let loaded = model_states(s.addr)
        .iter()
        .filter(|(_, state)| state == "loaded")
        .count();
    assert_eq!(loaded, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn requests_to_two_models_run_at_once() {
    let dir = models_dir("concurrent", &["a", "b"]);
    let mut config = models_config(&dir, 4096);
    config.engine.sequences = 1;
    let s = Server::start(config);
    // A request that names no model, with several served and none loaded at start: 400.
    let r = s.post("/v1/completions", &json!({"prompt": "Hi", "max_tokens": 2}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "model");

    // `a` generates for seconds on its one sequence; `b`, on an engine of its own, answers
    // meanwhile.
    let mut running = open_long_stream(s.addr, "a");
    let r = complete(&s, "b");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "b");
    let event: Value = serde_json::from_str(&next_event(&mut running)).unwrap();
    assert_eq!(event["model"], "a");
    assert!(event["choices"][0]["finish_reason"].is_null(), "{event}");
    let _ = running.get_ref().shutdown(std::net::Shutdown::Both);
    let health = s.get("/health").json();
    assert_eq!(health["models"], json!({"a": "loaded", "b": "loaded"}));
    std::fs::remove_dir_all(&dir).unwrap();
}
