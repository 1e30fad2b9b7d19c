//! The server against clients that do not play along, on a tiny fixture model: headers or
//! bodies sent byte by byte, more connections than allowed, requests half sent when the server
//! is stopped, clients that half-close; the server cuts them on time and keeps answering the
//! rest.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{assert_healthy_on, kept_alive, read_one_response, refused_answer, tiny_server};

/// The start of a request with a JSON body of 100 bytes: its headers and the body's first bytes.
const BODY_START: &[u8] =
    b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
      Content-Length: 100\r\n\r\n{\"prompt\":";

/// A connection to `addr` that has sent `part` of a request.
fn sent_part(addr: SocketAddr, part: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(part).unwrap();
    stream
}

/// Whether the server has closed `stream` (EOF or reset); drops any data it sent.
fn is_closed(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut buf = [0; 4096];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn a_client_that_dribbles_its_headers_is_cut_after_the_header_timeout() {
    let s = tiny_server(|c| c.header_timeout = Duration::from_secs(1));
    let start = Instant::now();
    let head = b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n";
    let mut stream = sent_part(s.addr, head);
    // One byte of a header every 100 ms, for up to 10 s: the server must close before.
    let header = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut cut = false;
    for byte in header.iter().cycle().take(100) {
        if stream.write_all(&[*byte]).is_err() || is_closed(&mut stream) {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = start.elapsed();
    assert!(cut, "a client dribbling headers was held for {elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(4),
        "cut only after {elapsed:?}"
    );
    // The server still answers.
    assert_eq!(s.get("/health").status, 200);
}

#[test]
fn a_client_that_dribbles_its_body_gets_408_after_the_body_timeout() {
    let s = tiny_server(|c| c.body_timeout = Duration::from_secs(1));
    let start = Instant::now();
    let stream = sent_part(s.addr, BODY_START);
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let r = read_one_response(&mut BufReader::new(stream)).expect("an answer");
    assert_eq!(r.status, 408, "{}", r.text());
    assert!(start.elapsed() < Duration::from_secs(4));
    r.error_param();
}

#[test]
fn past_the_connection_cap_new_connections_are_refused_while_open_ones_still_answer() {
    let s = tiny_server(|c| c.max_connections = 3);
    let mut kept = kept_alive(s.addr);
    // Two idle connections fill the cap.
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(s.addr).unwrap())
        .collect();
    // The next one is answered 503 and closed, not held open. The server counts the idle
    // connections once it has accepted them, which a loaded machine may take a while to do;
    // until then a new one is still served, so ask again until it is refused or 10 s pass.
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let answer = refused_answer(s.addr);
        if !answer.starts_with("HTTP/1.1 200") || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 503"),
        "{answer}"
    );
    // A connection served before still gets its answers.
    assert_healthy_on(&mut kept);
    // Once connections close, new ones are served again.
    drop(idle);
    drop(kept);
    let start = Instant::now();
    while !s.is_healthy() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "never served again"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn shutdown_during_half_sent_requests_completes_promptly() {
    let mut s = tiny_server(|_| {});
    // Headers cut in the middle, and a body cut in the middle (the default timeouts, 10 s and
    // 30 s, must not hold the drain).
    let _headers = sent_part(s.addr, b"POST /v1/completions HTTP/1.1\r\nHost: loc");
    let mut body = sent_part(s.addr, BODY_START);
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    s.stop().expect("the server stops cleanly");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "the drain waited {:?} for half-sent requests",
        start.elapsed()
    );
    // The half-sent body was answered 503 (or its connection closed), not left hanging.
    body.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    let _ = body.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 503"),
        "{answer}"
    );
}

#[test]
fn a_client_that_half_closes_after_its_request_gets_its_answer() {
    let s = tiny_server(|c| c.half_close = true);
    let body = json!({"prompt": "a", "max_tokens": 8}).to_string();
    let mut stream = TcpStream::connect(s.addr).unwrap();
    write!(
        stream,
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let r = read_one_response(&mut BufReader::new(stream)).expect("an answer");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["choices"][0]["text"].is_string());
}
