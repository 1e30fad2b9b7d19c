//! A server under test by its address, whether it runs in the test process or as a child
//! process: the requests tests send it, its metrics, the connections tests hold open (streams
//! in flight, keep-alive connections) and the waits for the server to catch up. Shared with the
//! binary's tests in `crates/cli/tests/serve_support`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{Response, read_one_response, request, send_head, try_request};

/// A `/health` request for a keep-alive connection.
pub const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Where a server under test listens.
pub struct Endpoint {
    pub addr: SocketAddr,
}

impl Endpoint {
    pub fn get(&self, path: &str) -> Response {
        request(self.addr, "GET", path, b"")
    }

    pub fn post(&self, path: &str, body: &Value) -> Response {
        request(self.addr, "POST", path, body.to_string().as_bytes())
    }

    /// Whether `/health` answers 200 now.
    pub fn is_healthy(&self) -> bool {
        try_request(self.addr, "GET", "/health", b"").is_ok_and(|r| r.status == 200)
    }

    /// A metric's value from `/metrics` (the first sample whose line starts with `name`).
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.get("/metrics").text();
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    /// Waits (up to 5 s) for a gauge to reach `value`: the engine retires a finished sequence on
    /// its next step, which may come just after the client has its last byte.
    pub fn settled_metric(&self, name: &str, value: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = self.metric(name);
            if got == value || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits (up to 60 s) until `condition` holds.
pub fn wait_for(mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "condition never held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A request that runs for seconds on the tiny model (4000 tokens; its end-of-generation
/// tokens banned), for tests that need one in flight. Needs a context of 4096.
pub fn long_request(stream: bool) -> String {
    json!({"prompt": "a", "max_tokens": 4000, "stream": stream,
           "logit_bias": {"1": -100, "106": -100}})
    .to_string()
}

/// Sends the completion request `body` on a fresh connection, leaving its answer unread.
pub fn open_stream(addr: SocketAddr, body: &str) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(addr).unwrap();
    send_head(&mut stream, "POST", "/v1/completions", body.len()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    BufReader::new(stream)
}

/// The next `data:` payload of a stream.
pub fn next_event(stream: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stream.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(data) = line.strip_prefix("data: ") {
            return data.trim_end().to_string();
        }
    }
}

/// A keep-alive connection whose first `/health` was answered 200.
pub fn kept_alive(addr: SocketAddr) -> BufReader<TcpStream> {
    let mut kept = BufReader::new(TcpStream::connect(addr).unwrap());
    assert_healthy_on(&mut kept);
    kept
}

/// Asks `/health` on the keep-alive connection `kept` and asserts a 200.
pub fn assert_healthy_on(kept: &mut BufReader<TcpStream>) {
    kept.get_mut().write_all(HEALTH).unwrap();
    assert_eq!(read_one_response(kept).unwrap().status, 200);
}

/// What a new connection asking `/health` reads until the server closes it: the answer of a
/// server past its connection cap. Panics when the server neither answers nor closes within
/// 30 s, which is what a connection held past the cap (or left in the backlog) does; the wait
/// is long so that a loaded machine's slow answer is not taken for one.
pub fn refused_answer(addr: SocketAddr) -> String {
    let mut refused = TcpStream::connect(addr).unwrap();
    let _ = refused.write_all(HEALTH);
    refused
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = Vec::new();
    if let Err(e) = refused.read_to_end(&mut answer) {
        let timed_out = matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        );
        assert!(
            !timed_out,
            "held past the cap: no answer and no close in 30 s"
        );
    }
    String::from_utf8_lossy(&answer).into_owned()
}
