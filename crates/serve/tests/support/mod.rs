//! The server of `rinfer-serve` running inside the test process on loopback, and a minimal
//! HTTP/1.1 client for it, shared by the serve tests. The client is written out (no HTTP
//! crate) so that tests can also send bytes no well-behaved client would.
//!
//! A test builds the [`ServeConfig`] the command line would ([`config`]: `rinfer serve --model
//! MODEL --ctx CTX`, every other option its default) and [`Server::start`]s it with
//! [`rinfer_serve::serve_on`] on `127.0.0.1:0`. What only the binary does (signals, logs,
//! flags, child processes for templates) is tested in `crates/cli/tests`.

#![allow(dead_code)]

mod http;
mod inputs;

// Each test file uses its own part of the support.
#[allow(unused_imports)]
pub use http::*;
#[allow(unused_imports)]
pub use inputs::*;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rinfer_serve::{ServeConfig, ServeError, model_name, serve_on};
use serde_json::Value;
use tokio::sync::oneshot;

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
