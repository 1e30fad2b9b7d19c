//! A bounded soak of `rinfer serve` on the default model: for a minute, good clients
//! (completions, chat streams, tokenize) beside bad ones (malformed JSON, a body not declared
//! JSON, a foreign `Host`, an oversized body, an unknown path) and slow ones (headers or a body
//! sent byte by byte, idle connections, clients that leave mid-stream). Every good request is
//! answered, every bad one gets its status, the slow ones are cut, nothing panics, and the
//! server's memory stays flat.
//!
//! Needs the model: `cargo xtask test` passes its path in `RINFER_TEST_MODEL`.

mod serve_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::{Server, default_model, request, request_with_headers, send_head};

/// How long the clients run.
const SOAK: Duration = Duration::from_secs(60);
/// Good clients running at once (with the one streaming slow client: at most `--parallel`).
const GOOD_CLIENTS: usize = 3;
/// Pause between two bad requests, so that they come as often as the good ones, not as fast
/// as refusals can be answered.
const BAD_CLIENT_PAUSE: Duration = Duration::from_millis(20);
/// The header and body timeouts the server is started with, in seconds.
const TIMEOUT_SECS: u64 = 2;
/// Growth of the resident memory allowed over the soak (allocator noise; a leak per request
/// over thousands of requests exceeds it).
const RSS_SLACK_KIB: u64 = 48 * 1024;

/// Good request number `n`: `None` when answered as it should be, else what went wrong.
fn good_request(addr: SocketAddr, n: usize) -> Option<String> {
    let (path, body) = match n % 3 {
        0 => (
            "/v1/completions",
            json!({"prompt": format!("Soak {n}"), "max_tokens": 6, "seed": n}),
        ),
        1 => (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": format!("Soak {n}")}],
                   "max_tokens": 6, "stream": true}),
        ),
        _ => ("/tokenize", json!({"content": format!("Soak {n} tokens")})),
    };
    let r = request(addr, "POST", path, body.to_string().as_bytes());
    if r.status != 200 {
        return Some(format!("{path} -> {}: {}", r.status, r.text()));
    }
    let complete = match n % 3 {
        0 => r.json()["choices"][0]["text"].is_string(),
        1 => {
            let events = r.events();
            events.last().map(String::as_str) == Some("[DONE]") && !r.has_error_event()
        }
        _ => r.json()["tokens"].is_array(),
    };
    (!complete).then(|| format!("{path}: incomplete answer {}", r.text()))
}

/// Bad request number `n`: `None` when refused with the right status.
fn bad_request(addr: SocketAddr, n: usize) -> Option<String> {
    let json = "Content-Type: application/json";
    let good_body = json!({"prompt": "a", "max_tokens": 2}).to_string();
    let (expected, r) = match n % 5 {
        0 => (
            400,
            request(addr, "POST", "/v1/completions", b"{\"prompt\": [1,"),
        ),
        1 => (
            415,
            request_with_headers(
                addr,
                "POST",
                "/v1/completions",
                "localhost",
                &["Content-Type: text/plain"],
                good_body.as_bytes(),
            ),
        ),
        2 => (
            403,
            request_with_headers(
                addr,
                "POST",
                "/v1/completions",
                "rebound.example",
                &[json],
                good_body.as_bytes(),
            ),
        ),
        3 => (
            413,
            request(addr, "POST", "/v1/completions", &vec![b' '; 80 << 10]),
        ),
        _ => (404, request(addr, "GET", "/v2/nothing", b"")),
    };
    (r.status != expected).then(|| format!("bad request {n}: {} not {expected}", r.status))
}

/// Whether the server closes `stream` within the timeout (plus slack) while it is fed a byte
/// every 200 ms.
fn cut_while_dribbling(mut stream: TcpStream, bytes: &[u8]) -> bool {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0; 1024];
    for byte in bytes.iter().cycle() {
        if start.elapsed() > Duration::from_secs(TIMEOUT_SECS + 3) {
            return false;
        }
        if stream.write_all(&[*byte]).is_err() {
            return true;
        }
        match stream.read(&mut buf) {
            // An answer (408) or the close.
            Ok(_) => return true,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Slow client number `n`: `None` when the server dealt with it.
fn slow_client(addr: SocketAddr, n: usize) -> Option<String> {
    match n % 4 {
        0 => {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
                .unwrap();
            (!cut_while_dribbling(stream, b"abcdefgh")).then(|| "headers never cut".into())
        }
        1 => {
            let mut stream = TcpStream::connect(addr).unwrap();
            send_head(&mut stream, "POST", "/v1/completions", 1000).unwrap();
            (!cut_while_dribbling(stream, b"{\"prompt\": \"aaaa")).then(|| "body never cut".into())
        }
        2 => {
            // An idle connection: closed once the header timeout passes.
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(TIMEOUT_SECS + 5)))
                .unwrap();
            let mut buf = [0; 16];
            stream
                .read(&mut buf)
                .is_err()
                .then(|| "an idle connection was kept".into())
        }
        _ => {
            // A stream left after its first event.
            let body = json!({"prompt": "Leave", "max_tokens": 64, "stream": true}).to_string();
            let mut stream = TcpStream::connect(addr).unwrap();
            send_head(&mut stream, "POST", "/v1/completions", body.len()).unwrap();
            stream.write_all(body.as_bytes()).unwrap();
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while !line.starts_with("data: ") {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return Some("the stream ended before its first event".into());
                }
            }
            None
        }
    }
}

/// Runs `client` with numbers 0, 1, … until the soak ends; returns its failures and count.
fn until_soak_ends(
    start: Instant,
    first: usize,
    client: impl Fn(usize) -> Option<String>,
) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut n = first;
    while start.elapsed() < SOAK {
        failures.extend(client(n));
        n += 1;
    }
    (failures, n - first)
}

#[test]
fn a_minute_of_good_bad_and_slow_clients_leaves_no_panic_no_growth_and_no_good_request_unanswered()
{
    let model = default_model().display().to_string();
    let timeout = TIMEOUT_SECS.to_string();
    let s = Server::start(&[
        "--model",
        &model,
        "--ctx",
        "512",
        "--parallel",
        "4",
        "--queue",
        "32",
        "--threads",
        "2",
        "--header-timeout",
        &timeout,
        "--body-timeout",
        &timeout,
        "--max-body-bytes",
        "65536",
        "--max-connections",
        "64",
        // One block of the prefix cache, which the warm-up fills: what follows only evicts.
        "--kv-cache-mib",
        "1",
    ]);
    let addr = s.addr;
    // Warm every code path once before measuring memory.
    for n in 0..6 {
        assert_eq!(good_request(addr, n), None);
        assert_eq!(bad_request(addr, n), None);
    }
    let rss_start = s.rss_kib();
    let start = Instant::now();
    let (failures, good, bad, slow, rss_half) = std::thread::scope(|scope| {
        let good: Vec<_> = (0..GOOD_CLIENTS)
            .map(|c| {
                scope.spawn(move || until_soak_ends(start, c * 100_000, |n| good_request(addr, n)))
            })
            .collect();
        let bad = scope.spawn(move || {
            until_soak_ends(start, 0, |n| {
                std::thread::sleep(BAD_CLIENT_PAUSE);
                bad_request(addr, n)
            })
        });
        let slow = scope.spawn(move || until_soak_ends(start, 0, |n| slow_client(addr, n)));
        // Halfway, the memory the rest of the soak must not grow past (the blocking pool and
        // the allocator's arenas have reached their size by then).
        std::thread::sleep(SOAK / 2);
        let rss_half = s.rss_kib();
        let mut failures = Vec::new();
        let mut counts = Vec::new();
        for handle in good.into_iter().chain([bad, slow]) {
            let (f, count) = handle.join().expect("client thread");
            failures.extend(f);
            counts.push(count);
        }
        let good: usize = counts[..GOOD_CLIENTS].iter().sum();
        (
            failures,
            good,
            counts[GOOD_CLIENTS],
            counts[GOOD_CLIENTS + 1],
            rss_half,
        )
    });
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        good >= 30 && bad >= 30 && slow >= 4,
        "too few requests: {good} good, {bad} bad, {slow} slow"
    );
    assert_eq!(s.settled_metric("rinfer_running_sequences", 0.0), 0.0);
    let rss_end = s.rss_kib();
    assert!(
        rss_end <= rss_half + RSS_SLACK_KIB / 3,
        "RSS grew from {rss_half} KiB to {rss_end} KiB over the second half of the soak"
    );
    assert!(
        rss_end <= rss_start + RSS_SLACK_KIB,
        "RSS grew from {rss_start} KiB to {rss_end} KiB over {good} good, {bad} bad and {slow} slow clients"
    );
    println!(
        "soak: {good} good, {bad} bad, {slow} slow clients; RSS {rss_start} -> {rss_half} -> {rss_end} KiB"
    );
    // The server still answers, and its log shows no panic.
    assert_eq!(s.get("/health").status, 200);
    let log = s.log.lock().unwrap();
    let panics: Vec<&String> = log.iter().filter(|l| l.contains("panicked")).collect();
    assert!(panics.is_empty(), "{panics:#?}");
}
