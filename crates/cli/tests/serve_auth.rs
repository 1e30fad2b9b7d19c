//! API keys on `rinfer serve`, on a tiny fixture model: without a key configured the API is
//! open; with keys (`--api-key`, `--api-key-file`) every API route answers 401 to a request
//! without one of them, `/health` stays open, `/metrics` follows `--open-metrics`, and no key
//! reaches the log.

mod serve_support;

use std::process::Command;

use serve_support::{Response, Server, request_with_headers, tiny_model};

const KEY_ON_COMMAND_LINE: &str = "sk-command-line-key-1";
const KEY_IN_FILE: &str = "sk-file-key-2";

fn server(extra: &[&str]) -> Server {
    let model = tiny_model();
    let mut args = vec!["--model", model.as_str(), "--threads", "2", "--ctx", "256"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

fn keyed_server(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let file = dir.path().join("keys.txt");
    std::fs::write(&file, format!("# keys of the team\n\n{KEY_IN_FILE}\n")).unwrap();
    let file = file.display().to_string();
    let mut args = vec!["--api-key", KEY_ON_COMMAND_LINE, "--api-key-file", &file];
    args.extend_from_slice(extra);
    server(&args)
}

fn call(s: &Server, method: &str, path: &str, auth: Option<&str>) -> Response {
    let body: &[u8] = match path {
        "/v1/completions" => br#"{"prompt": "hi", "max_tokens": 2}"#,
        "/v1/chat/completions" => {
            br#"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}"#
        }
        "/tokenize" => br#"{"content": "hi"}"#,
        "/detokenize" => br#"{"tokens": [2]}"#,
        _ => b"",
    };
    let auth = auth.map(|a| format!("Authorization: {a}"));
    let mut headers = vec!["Content-Type: application/json"];
    headers.extend(auth.as_deref());
    request_with_headers(s.addr, method, path, "localhost", &headers, body)
}

const API: [(&str, &str); 5] = [
    ("POST", "/v1/completions"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("POST", "/tokenize"),
    ("POST", "/detokenize"),
];

#[test]
fn every_api_route_answers_401_without_a_valid_key_and_serves_either_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = keyed_server(&dir, &[]);
    let wrong_bearer = format!("Bearer {KEY_ON_COMMAND_LINE}x");
    let basic = format!("Basic {KEY_IN_FILE}");
    for (method, path) in API.iter().chain(&[("GET", "/metrics")]) {
        for auth in [None, Some(wrong_bearer.as_str()), Some(basic.as_str())] {
            let r = call(&s, method, path, auth);
            assert_eq!(r.status, 401, "{method} {path} {auth:?}: {}", r.text());
            let error = &r.json()["error"];
            assert_eq!(error["type"], "invalid_request_error");
            assert_eq!(error["code"], "invalid_api_key");
            assert!(error["message"].as_str().unwrap().contains("API key"));
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        }
        for key in [KEY_ON_COMMAND_LINE, KEY_IN_FILE] {
            let r = call(&s, method, path, Some(&format!("Bearer {key}")));
            assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
        }
    }
    assert_eq!(call(&s, "GET", "/health", None).status, 200);
    let log = s.wait_for_log("2 API keys").join("\n");
    assert!(
        !log.contains(KEY_ON_COMMAND_LINE) && !log.contains(KEY_IN_FILE),
        "a key reached the log:\n{log}"
    );
}

#[test]
fn metrics_are_served_without_a_key_only_with_open_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let s = keyed_server(&dir, &["--open-metrics"]);
    assert_eq!(call(&s, "GET", "/metrics", None).status, 200);
    assert_eq!(call(&s, "GET", "/v1/models", None).status, 401);
}

#[test]
fn without_keys_the_api_is_open() {
    let s = server(&[]);
    for (method, path) in API {
        let r = call(&s, method, path, None);
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
    }
}

#[test]
fn an_unusable_key_file_stops_the_server_with_a_message_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "# nothing yet\n").unwrap();
    let spaced = dir.path().join("spaced.txt");
    std::fs::write(&spaced, "good\nnot a key\n").unwrap();
    let missing = dir.path().join("missing.txt");
    let model = tiny_model();
    for (file, expected) in [
        (&empty, "has no key"),
        (&spaced, "line 2"),
        (&missing, "cannot read the API key file"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_rinfer"))
            .args(["serve", "--port", "0", "--model", &model, "--api-key-file"])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains("not a key"), "{stderr}");
    }
}
