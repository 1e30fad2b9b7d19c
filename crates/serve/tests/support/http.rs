//! A minimal HTTP/1.1 client, written out (no HTTP crate) so that tests can also send bytes no
//! well-behaved client would. Shared with the binary's tests in `crates/cli/tests/serve_support`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `data:` payloads of a server-sent-event body, `[DONE]` included.
    pub fn events(&self) -> Vec<String> {
        self.text()
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    /// Whether a server-sent-event body carries an error event: an object with an `error`
    /// member (generated text may itself say "error").
    pub fn has_error_event(&self) -> bool {
        self.events().iter().any(|e| {
            serde_json::from_str::<serde_json::Value>(e).is_ok_and(|v| v.get("error").is_some())
        })
    }

    /// The `(name, arguments)` of a whole chat answer's tool calls (each asserted to be in
    /// OpenAI's shape), with its finish reason.
    pub fn tool_calls(&self) -> (Vec<(String, String)>, String) {
        assert_eq!(self.status, 200, "{}", self.text());
        let body = self.json();
        let choice = &body["choices"][0];
        let calls = choice["message"]["tool_calls"]
            .as_array()
            .unwrap_or_else(|| panic!("no tool_calls: {body}"))
            .iter()
            .map(|c| {
                assert_eq!(c["type"], "function");
                assert!(c["id"].as_str().unwrap().starts_with("call_"));
                let f = &c["function"];
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["arguments"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (calls, choice["finish_reason"].as_str().unwrap().to_string())
    }

    /// The OpenAI error object's `param`, asserting the error shape.
    pub fn error_param(&self) -> Option<String> {
        let body = self.json();
        let error = &body["error"];
        assert!(error["message"].is_string(), "no error object: {body}");
        assert!(error["type"].is_string(), "no error type: {body}");
        error["param"].as_str().map(str::to_string)
    }

    /// Asserts that this is an OpenAI error of `status` naming the request field `param`, whose
    /// text says `says`.
    pub fn assert_error(&self, status: u16, param: &str, says: &str) {
        assert_eq!(self.status, status, "{}", self.text());
        assert_eq!(self.error_param().as_deref(), Some(param));
        assert!(self.text().contains(says), "{}", self.text());
    }
}

/// One request on a fresh connection (`Connection: close`).
pub fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Response {
    try_request(addr, method, path, body).unwrap_or_else(|e| panic!("{method} {path} failed: {e}"))
}

pub fn try_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(300)))?;
    send_head(&mut stream, method, path, body.len())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_response(&raw)
}

/// Writes a request head with a JSON content type and `Connection: close`.
pub fn send_head(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    len: usize,
) -> std::io::Result<()> {
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {len}\r\nConnection: close\r\n\r\n"
    )
}

/// Sends `raw` as it is on a fresh connection and reads the answer to the end.
pub fn raw_request(addr: SocketAddr, raw: &[u8]) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(raw)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    parse_response(&answer)
}

/// A request in the shape browsers and proxies send: JSON body, the given `Host`, extra headers
/// (`"Name: value"` lines), `Connection: close`.
pub fn request_with_headers(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[&str],
    body: &[u8],
) -> Response {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
    for header in headers {
        raw.push_str(header);
        raw.push_str("\r\n");
    }
    raw.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw_request(addr, &raw).unwrap_or_else(|e| panic!("{method} {path} failed: {e}"))
}

/// Reads one response (with a `Content-Length`) from a keep-alive connection.
pub fn read_one_response(stream: &mut BufReader<TcpStream>) -> std::io::Result<Response> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(line.as_bytes());
        if line == "\r\n" {
            break;
        }
    }
    let partial = parse_response(&head)?;
    let length: usize = partial
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok(Response { body, ..partial })
}

fn parse_response(raw: &[u8]) -> std::io::Result<Response> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        body = dechunk(&body).ok_or_else(|| bad("bad chunked body"))?;
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// The state `GET /v1/models` gives each model, by name, in its order.
pub fn model_states(addr: SocketAddr) -> Vec<(String, String)> {
    let r = request(addr, "GET", "/v1/models", b"");
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

/// Asserts the models' states are `expected`, in its order.
pub fn expect_model_states(addr: SocketAddr, expected: &[(&str, &str)]) {
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(id, state)| (id.to_string(), state.to_string()))
        .collect();
    assert_eq!(model_states(addr), expected);
}
