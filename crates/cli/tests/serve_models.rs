//! `rinfer serve` with several models: each request's `model` picks one, loaded on first use
//! within a memory budget (the least recently used idle model unloaded to make room, never one
//! with requests in flight), each with an engine of its own; `/v1/models` and `/health` say
//! where each is.

mod serve_support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use serve_support::{Server, send_head, tiny_model};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
        .display()
        .to_string()
}

/// A fresh directory holding a copy of the tiny Gemma 3 model under each of `names` (each
/// `NAME.gguf`): models of one size, so that a budget can be set in their units.
fn models_dir(test: &str, names: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rinfer-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for name in names {
        std::fs::copy(tiny_model(), dir.join(format!("{name}.gguf"))).unwrap();
    }
    dir
}

/// The state `/v1/models` gives each model, by name, in its order.
fn states(s: &Server) -> Vec<(String, String)> {
    let r = s.get("/v1/models");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let id = m["id"].as_str().unwrap().to_string();
            (id, m["state"].as_str().unwrap().to_string())
        })
        .collect()
}

fn expect_states(s: &Server, expected: &[(&str, &str)]) {
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(id, state)| (id.to_string(), state.to_string()))
        .collect();
    assert_eq!(states(s), expected);
}

fn complete(s: &Server, model: &str) -> serve_support::Response {
    s.post(
        "/v1/completions",
        &json!({"model": model, "prompt": "Hello", "max_tokens": 3, "temperature": 0}),
    )
}

/// A streamed request to `model` that runs for seconds (4000 tokens, the tiny Gemma's
/// end-of-generation tokens banned; needs `--ctx 4096`), read up to its first token.
fn open_long_stream(addr: SocketAddr, model: &str) -> BufReader<TcpStream> {
    let body = json!({"model": model, "prompt": "a", "max_tokens": 4000, "stream": true,
                      "logit_bias": {"1": -100, "106": -100}})
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    send_head(&mut stream, "POST", "/v1/completions", body.len()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut stream = BufReader::new(stream);
    next_event(&mut stream);
    stream
}

/// The next `data:` payload of a stream.
fn next_event(stream: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stream.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(data) = line.strip_prefix("data: ") {
            return data.trim_end().to_string();
        }
    }
}

fn wait_for(mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "condition never held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
    expect_states(
        &s,
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
    expect_states(
        &s,
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
        states(&s)[2],
        ("broken".to_string(), "unloaded".to_string())
    );
    assert_eq!(complete(&s, "gemma").status, 200);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_model_is_a_404_on_every_api() {
    let s = Server::start(&["--model", &tiny_model(), "--threads", "2", "--ctx", "512"]);
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
    let dir_arg = arg(&dir);
    let common = ["--threads", "2", "--ctx", "4096", "--parallel", "1"];
    let mut args = vec!["--models-dir", dir_arg.as_str(), "--kv-cache-mib", "0"];
    args.extend(common);

    // The memory one model needs, as the server estimates it.
    let one = {
        let s = Server::start(&args);
        expect_states(
            &s,
            &[("a", "unloaded"), ("b", "unloaded"), ("c", "unloaded")],
        );
        assert_eq!(complete(&s, "a").status, 200);
        s.get("/v1/models").json()["data"][0]["memory_bytes"]
            .as_u64()
            .unwrap()
    };
    // Room for two.
    let budget = (2 * one).div_ceil(1 << 20).to_string();
    args.extend(["--models-memory-mib", budget.as_str()]);
    let s = Server::start(&args);
    for model in ["a", "b", "a"] {
        assert_eq!(complete(&s, model).status, 200);
    }
    expect_states(&s, &[("a", "loaded"), ("b", "loaded"), ("c", "unloaded")]);
    // `b` was used least recently: it makes room for `c`.
    assert_eq!(complete(&s, "c").status, 200);
    expect_states(&s, &[("a", "loaded"), ("b", "unloaded"), ("c", "loaded")]);

    // `c` is in use: `a` makes room for `b`, though `c` was used before it.
    let mut running_c = open_long_stream(s.addr, "c");
    assert_eq!(complete(&s, "a").status, 200);
    assert_eq!(complete(&s, "b").status, 200);
    expect_states(&s, &[("a", "unloaded"), ("b", "loaded"), ("c", "loaded")]);

    // Both loaded models in use: nothing can make room for `a`.
    let mut running_b = open_long_stream(s.addr, "b");
    let r = complete(&s, "a");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("cannot load `a`"), "{message}");
    assert!(message.contains("in use"), "{message}");
    expect_states(&s, &[("a", "unloaded"), ("b", "loaded"), ("c", "loaded")]);
    // Both streams still run.
    assert_ne!(next_event(&mut running_b), "[DONE]");
    assert_ne!(next_event(&mut running_c), "[DONE]");

    // Once their clients leave, `a` loads again.
    for stream in [&running_b, &running_c] {
        let _ = stream.get_ref().shutdown(std::net::Shutdown::Both);
    }
    wait_for(|| complete(&s, "a").status == 200);
    let loaded = states(&s)
        .iter()
        .filter(|(_, state)| state == "loaded")
        .count();
    assert_eq!(loaded, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn requests_to_two_models_run_at_once() {
    let dir = models_dir("concurrent", &["a", "b"]);
    let dir_arg = arg(&dir);
    let s = Server::start(&[
        "--models-dir",
        &dir_arg,
        "--threads",
        "2",
        "--ctx",
        "4096",
        "--parallel",
        "1",
        "--kv-cache-mib",
        "0",
    ]);
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
