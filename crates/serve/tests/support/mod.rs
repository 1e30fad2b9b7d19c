//! The server of `rinfer-serve` running inside the test process on loopback, and a minimal
//! HTTP/1.1 client for it, shared by the serve tests. The client is written out (no HTTP
//! crate) so that tests can also send bytes no well-behaved client would.
//!
//! A test builds the [`ServeConfig`] the command line would ([`config`]: `rinfer serve --model
//! MODEL --ctx CTX`, every other option its default) and [`Server::start`]s it with
//! [`rinfer_serve::serve_on`] on `127.0.0.1:0`. What only the binary does (signals, logs,
//! flags, child processes for templates) is tested in `crates/cli/tests`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rinfer_serve::{ServeConfig, ServeError, model_name, serve_on};
use serde_json::Value;
use tokio::sync::oneshot;

/// The path of `path` in the repository's `tests/fixtures` folder.
pub fn fixture(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
        .display()
        .to_string()
}

/// The JSON schema of the test tool `get_weather`'s arguments.
pub fn weather_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "unit": {"enum": ["celsius", "fahrenheit"]}
        },
        "required": ["city", "unit"],
        "additionalProperties": false
    })
}

/// A fixture model: tiny, random weights, a Gemma 3 tokenizer.
pub fn tiny_model() -> String {
    fixture("models/gemma3-tiny-q4_k_m.gguf")
}

/// The default model, whose path `cargo xtask test` resolves through `rinfer fetch` and passes
/// down in `RINFER_TEST_MODEL`.
pub fn default_model() -> PathBuf {
    let path = std::env::var_os("RINFER_TEST_MODEL").map(PathBuf::from).expect(
        "RINFER_TEST_MODEL is unset: run the tests with `cargo xtask test`, or set it to the path `rinfer fetch` prints",
    );
    assert!(path.is_file(), "{} is not a model file", path.display());
    path
}

/// The configuration `rinfer serve --model MODEL --ctx CTX` makes, every other option at its
/// default (no memory limit on the models).
pub fn config(model: &str, ctx: usize) -> ServeConfig {
    let path = PathBuf::from(model);
    let mut config = ServeConfig::new(path.clone(), model_name(&path));
    config.engine.context = Some(ctx);
    config
}

/// A server running on a thread of the test, stopped (drained) when dropped.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Server {
    /// Serves `config` on a free loopback port and waits until `/health` says it is ready.
    pub fn start(config: ServeConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        let addr = listener.local_addr().expect("a bound address");
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            serve_on(listener, config, async {
                let _ = stopped.await;
            })
        });
        let mut server = Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        };
        server.wait_healthy(Duration::from_secs(120));
        server
    }

    /// Waits for `/health` to answer 200; panics with the server's error if it ended.
    fn wait_healthy(&mut self, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(r) = try_request(self.addr, "GET", "/health", b"")
                && r.status == 200
            {
                return;
            }
            if self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
                let ended = self.thread.take().map(JoinHandle::join);
                panic!("the server ended before it was healthy: {ended:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server never became healthy");
    }

    /// Asks the server to drain and waits until it has stopped, returning how it ended.
    pub fn stop(&mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join().expect("the server thread does not panic"),
            None => Ok(()),
        }
    }

    pub fn get(&self, path: &str) -> Response {
        request(self.addr, "GET", path, b"")
    }

    pub fn post(&self, path: &str, body: &Value) -> Response {
        request(self.addr, "POST", path, body.to_string().as_bytes())
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

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

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

    /// The OpenAI error object's `param`, asserting the error shape.
    pub fn error_param(&self) -> Option<String> {
        let body = self.json();
        let error = &body["error"];
        assert!(error["message"].is_string(), "no error object: {body}");
        assert!(error["type"].is_string(), "no error type: {body}");
        error["param"].as_str().map(str::to_string)
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
