//! Who may call the server, on a tiny fixture model: a web page of another site cannot
//! start a generation (JSON bodies only, CORS only for listed origins) and cannot reach a
//! server on loopback through a name of its own (DNS rebinding).

mod support;

use serde_json::json;
use support::{request_with_headers, tiny_server};

#[test]
fn a_post_body_not_declared_json_is_refused_with_415_and_generates_nothing() {
    let s = tiny_server(|_| {});
    let body = json!({"prompt": "a", "max_tokens": 2}).to_string();
    let body = body.as_bytes();
    // What a cross-site form or `fetch(..., {mode: "no-cors"})` can send without a preflight.
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<String> = content_type
            .map(|c| format!("Content-Type: {c}"))
            .into_iter()
            .collect();
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let origin = ["Origin: http://localhost"];
        for extra in [&[][..], &origin[..]] {
            let all: Vec<&str> = headers.iter().chain(extra).copied().collect();
            let r =
                request_with_headers(s.addr, "POST", "/v1/completions", "localhost", &all, body);
            assert_eq!(r.status, 415, "{content_type:?}: {}", r.text());
            assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        }
    }
    assert_eq!(s.metric("rinfer_generated_tokens_total"), 0.0);
    let r = request_with_headers(
        s.addr,
        "POST",
        "/v1/completions",
        "localhost",
        &["Content-Type: Application/JSON; charset=utf-8"],
        body,
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn cors_preflights_are_answered_only_for_listed_origins() {
    let s = tiny_server(|c| c.cors_origins = vec!["https://app.example.com".into()]);
    let preflight = |origin: &str| {
        request_with_headers(
            s.addr,
            "OPTIONS",
            "/v1/chat/completions",
            "localhost",
            &[
                &format!("Origin: {origin}"),
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: content-type, authorization",
            ],
            b"",
        )
    };
    let r = preflight("https://app.example.com");
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert!(
        r.header("access-control-allow-methods")
            .unwrap()
            .contains("POST")
    );
    assert!(
        r.header("access-control-allow-headers")
            .unwrap()
            .contains("content-type")
    );

    let r = preflight("https://evil.example");
    assert_eq!(r.status, 403);
    assert_eq!(r.header("access-control-allow-origin"), None);
    r.error_param();

    // The listed origin's requests carry the header that lets the page read the answer.
    let body = json!({"prompt": "a", "max_tokens": 2}).to_string();
    let json = "Content-Type: application/json";
    let r = request_with_headers(
        s.addr,
        "POST",
        "/v1/completions",
        "localhost",
        &[json, "Origin: https://app.example.com"],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    // Another origin's are refused, even when they would not be preflighted.
    let r = request_with_headers(
        s.addr,
        "POST",
        "/v1/completions",
        "localhost",
        &[json, "Origin: https://evil.example"],
        body.as_bytes(),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    // Same-origin requests and those of clients that are not browsers pass.
    let host = format!("localhost:{}", s.addr.port());
    let same = format!("Origin: http://{host}");
    let r = request_with_headers(s.addr, "GET", "/v1/models", &host, &[&same], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert_eq!(s.get("/v1/models").status, 200);
}

#[test]
fn a_loopback_server_refuses_host_names_it_was_not_given() {
    let s = tiny_server(|c| c.allowed_hosts = vec!["api.example.com".into()]);
    let port = s.addr.port();
    let get = |host: &str| request_with_headers(s.addr, "GET", "/v1/models", host, &[], b"");
    // A page at http://rebound.example:PORT whose name now resolves to 127.0.0.1.
    for host in [format!("rebound.example:{port}"), "rebound.example".into()] {
        let r = get(&host);
        assert_eq!(r.status, 403, "{host}: {}", r.text());
        r.error_param();
    }
    let body = json!({"prompt": "a", "max_tokens": 2}).to_string();
    let r = request_with_headers(
        s.addr,
        "POST",
        "/v1/completions",
        &format!("rebound.example:{port}"),
        &["Content-Type: application/json"],
        body.as_bytes(),
    );
    assert_eq!(r.status, 403);
    assert_eq!(s.metric("rinfer_generated_tokens_total"), 0.0);
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("api.example.com:{port}"),
    ] {
        assert_eq!(get(&host).status, 200, "{host}");
    }
}
