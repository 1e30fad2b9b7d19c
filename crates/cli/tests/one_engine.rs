//! One engine behind every front end: the same prompt, seed and sampling settings give the same
//! tokens through `rinfer run`, through the library's `Engine`, and through `/v1/completions`.

mod cli_support;
mod serve_support;

use cli_support::{failure, rinfer, rinfer_with_stdin, succeeded};
use rinfer_model::{DeviceRequest, Engine, EngineSettings, LoadedModel, Request, SamplingParams};
use serde_json::{Value, json};
use serve_support::{Server, default_model, tiny_model};

const PROMPT: &str = "Once upon a time";
const MAX_TOKENS: usize = 24;

/// `rinfer run --json` with `temperature` and `seed`: its tokens and text.
fn through_cli(temperature: f32, seed: u64) -> (Vec<u32>, String) {
    let out = rinfer(&[
        "run",
        "--model",
        &tiny_model(),
        PROMPT,
        "--json",
        "-n",
        &MAX_TOKENS.to_string(),
        "--temperature",
        &temperature.to_string(),
        "--seed",
        &seed.to_string(),
    ]);
    succeeded(&out);
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let tokens = report["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .map(|t| t.as_u64().expect("a token id") as u32)
        .collect();
    (tokens, report["text"].as_str().expect("text").to_string())
}

/// The library's engine, as a program embedding rinfer would call it.
fn through_library(loaded: &LoadedModel, temperature: f32, seed: u64) -> (Vec<u32>, String) {
    let mut engine = Engine::new(loaded, EngineSettings::single(4096), DeviceRequest::Cpu)
        .expect("an engine on the CPU");
    let prompt = loaded
        .tokenizer
        .encode(PROMPT, true, false)
        .expect("tokens");
    let sampling = SamplingParams {
        temperature,
        seed,
        ..SamplingParams::default()
    };
    let out = engine
        .generate(
            Request::new(prompt, MAX_TOKENS).with_sampling(sampling),
            |_| {},
        )
        .expect("a generation");
    (out.tokens, out.text)
}

#[test]
fn run_the_library_engine_and_the_server_agree_greedy_and_seeded() {
    let loaded = LoadedModel::open(tiny_model()).expect("the fixture loads");
    let server = Server::start(&["--model", &tiny_model(), "--parallel", "2"]);
    for (temperature, seed) in [(0.0, 0), (0.9, 7), (1.3, 12345)] {
        let (cli_tokens, cli_text) = through_cli(temperature, seed);
        let (lib_tokens, lib_text) = through_library(&loaded, temperature, seed);
        assert_eq!(
            cli_tokens, lib_tokens,
            "temperature {temperature}, seed {seed}"
        );
        assert_eq!(cli_text, lib_text);
        let response = server.post(
            "/v1/completions",
            &json!({
                "model": "gemma3-tiny-q4_k_m",
                "prompt": PROMPT,
                "max_tokens": MAX_TOKENS,
                "temperature": temperature,
                "seed": seed,
            }),
        );
        assert_eq!(response.status, 200, "{}", response.text());
        let body = response.json();
        assert_eq!(
            body["choices"][0]["text"].as_str(),
            Some(cli_text.as_str()),
            "temperature {temperature}, seed {seed}"
        );
        assert_eq!(
            body["usage"]["completion_tokens"].as_u64(),
            Some(cli_tokens.len() as u64)
        );
    }
}

#[test]
fn serve_with_device_cuda_and_no_gpu_exits_1_with_a_clear_error() {
    let model = tiny_model();
    let out = rinfer(&[
        "serve", "--model", &model, "--port", "0", "--device", "cuda",
    ]);
    let stderr = failure(&out);
    assert!(stderr.contains("cannot start the engine"), "{stderr}");
    assert!(stderr.contains("CUDA"), "{stderr}");
}

#[test]
fn serve_with_device_auto_falls_back_to_the_cpu_and_says_why() {
    let server = Server::start(&["--model", &tiny_model(), "--device", "auto"]);
    server.wait_for_log("no usable CUDA device");
    assert_eq!(server.get("/v1/models").json()["data"][0]["device"], "cpu");
}

#[test]
fn run_on_the_cpu_by_default_prints_no_device_notice() {
    let model = tiny_model();
    let out = rinfer(&["run", "--model", &model, "Hello", "-n", "1"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("CUDA"), "{stderr}");
    assert!(
        !stderr.contains("decode"),
        "one token is not a decode: {stderr}"
    );
}

#[test]
fn chat_on_the_default_model_answers_a_scripted_question() {
    let model = default_model().display().to_string();
    let out = rinfer_with_stdin(
        &["chat", "--model", &model, "-n", "24", "--temperature", "0"],
        b"What is the capital of France?\n/exit\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The default model is a small base model: what it answers is not the point, that the
    // conversation is rendered, answered and ended is.
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(!answer.trim().is_empty(), "no answer; stderr: {stderr}");
    assert!(!answer.contains("<start_of_turn>"), "{answer:?}");
}
