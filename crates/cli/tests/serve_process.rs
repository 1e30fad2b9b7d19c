//! `rinfer serve` as a process: on SIGTERM it finishes the streams in flight while `/health`
//! answers 503, then exits with success; an error at start is one line naming its cause once;
//! under a low open-file limit it serves fewer connections and says so. What the server does
//! for clients is tested in `crates/serve/tests`.

mod serve_support;

use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;
use serve_support::{
    Server, assert_healthy_on, kept_alive, long_request, open_stream, refused_answer, tiny_model,
    wait_for,
};

fn server(extra: &[&str]) -> Server {
    let model = tiny_model();
    let mut args = vec!["--model", model.as_str(), "--threads", "2"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[test]
fn sigterm_finishes_streams_in_flight_answering_health_with_503_then_exits() {
    let mut s = server(&["--ctx", "4096"]);
    let mut stream = open_stream(s.addr, &long_request(true));
    wait_for(|| s.metric("rinfer_running_sequences") == 1.0);
    s.terminate();
    // While the stream in flight goes on, the listener still answers: `/health` says 503 (so
    // that a load balancer sees the drain) and new generations get 503.
    // A connection accepted just before the signal and still sending its headers when the
    // drain starts is dropped (the drain does not wait for half-sent requests): retry.
    wait_for(|| {
        serve_support::try_request(s.addr, "GET", "/health", b"").is_ok_and(|r| r.status == 503)
    });
    assert_eq!(s.get("/health").json()["status"], "draining");
    let r = s.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 2}));
    assert_eq!(r.status, 503, "{}", r.text());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stream, &mut rest).unwrap();
    assert!(rest.contains("data: [DONE]"), "the stream was cut: {rest}");
    assert!(rest.contains("\"finish_reason\":\"length\""));
    assert!(
        s.wait_exit(Duration::from_secs(30)),
        "exit status not success"
    );
    assert!(TcpStream::connect(s.addr).is_err(), "still accepting");
}

/// The `error:` line of a `rinfer serve` that could not start.
fn startup_error(args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .arg("serve")
        .args(args)
        .output()
        .expect("rinfer runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line in {stderr}"))
        .to_string()
}

#[test]
fn a_startup_error_names_its_cause_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let model = tiny_model();
    let line = startup_error(&["--model", &model, "--port", &port]);
    assert!(
        line.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{line}"
    );
    let cause = line.rsplit(": ").next().unwrap();
    assert_eq!(line.matches(cause).count(), 1, "the cause repeats: {line}");

    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.gguf");
    std::fs::write(&garbage, b"GGUF not really a model").unwrap();
    let line = startup_error(&["--model", garbage.to_str().unwrap(), "--port", "0"]);
    assert!(line.contains("cannot load"), "{line}");
    let parts: Vec<&str> = line.trim_start_matches("error: ").split(": ").collect();
    for (i, part) in parts.iter().enumerate() {
        assert!(
            !parts[i + 1..].iter().any(|later| later.contains(part)),
            "{part:?} repeats in {line}"
        );
    }
}

#[test]
fn under_a_low_open_file_limit_the_cap_shrinks_so_new_connections_are_still_answered() {
    let model = tiny_model();
    let s = Server::start_with_open_file_limit(
        128,
        &["--model", &model, "--threads", "2", "--ctx", "512"],
    );
    s.wait_for_log("serving at most 64 connections");
    let mut kept = kept_alive(s.addr);
    // More idle connections than the process has file descriptors left.
    let idle: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect(s.addr).ok())
        .collect();
    assert!(idle.len() > 64);
    // A new connection is answered at once (503) instead of waiting in the backlog, and the
    // connection served before still gets its answers.
    let answer = refused_answer(s.addr);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    assert_healthy_on(&mut kept);
}
