//! A GGUF file without a vocabulary (`tokenizer.ggml.model = "none"`) runs from token ids:
//! `rinfer logits --tokens` and the API's token-array prompts work, and text prompts are
//! refused with an error that names the missing vocabulary. The broken mixture-of-experts
//! files, which have no vocabulary either, are refused for their own fault.

#[path = "../../../tests/support/broken_moe_files.rs"]
mod broken_moe_files;
mod cli_support;
mod serve_support;

use broken_moe_files::BROKEN_MOE_FILES;
use cli_support::{failure, fixture, rinfer, succeeded};
use serde_json::{Value, json};
use serve_support::Server;

fn broken(name: &str) -> String {
    fixture(&format!("models/broken/{name}.gguf"))
}

#[test]
fn logits_of_token_ids_run_without_a_vocabulary() {
    let model = broken("moe_control_valid");
    let out = rinfer(&["logits", "--model", &model, "--tokens", "1,7,14,63"]);
    succeeded(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["positions"].as_array().unwrap().len(), 4);

    let stderr = failure(&rinfer(&["logits", "--model", &model, "--prompt", "hello"]));
    assert!(stderr.contains("no vocabulary"), "{stderr}");
}

#[test]
fn each_broken_file_is_refused_for_its_own_fault() {
    for (name, fault) in BROKEN_MOE_FILES {
        let out = rinfer(&["logits", "--model", &broken(name), "--tokens", "1,2,3"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(fault), "{name}: {stderr}");
        assert!(!stderr.contains("vocabulary"), "{name}: {stderr}");
    }
}

#[test]
fn the_api_takes_token_ids_and_refuses_text_naming_the_vocabulary() {
    let model = broken("moe_control_valid");
    let server = Server::start(&["--model", &model, "--threads", "2", "--ctx", "64"]);
    let r = server.post(
        "/v1/completions",
        &json!({"prompt": [1, 7, 14, 21], "max_tokens": 4, "temperature": 0}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["usage"]["completion_tokens"], 4, "{}", r.text());

    let r = server.post(
        "/v1/completions",
        &json!({"prompt": "hello", "max_tokens": 4}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.error_param().as_deref(), Some("prompt"));
    assert!(r.text().contains("no vocabulary"), "{}", r.text());
}
