//! The server of `rinfer-serve` running inside the test process on loopback, and a minimal
//! HTTP/1.1 client for it, shared by the serve tests. The client is written out (no HTTP
//! crate) so that tests can also send bytes no well-behaved client would.
//!
//! A test builds the [`ServeConfig`] the command line would ([`config`]: `rinfer serve --model
//! MODEL --ctx CTX`, every other option its default) and [`Server::start`]s it with
//! [`rinfer_serve::serve_on`] on `127.0.0.1:0`. What only the binary does (signals, logs,
//! flags, child processes for templates) is tested in `crates/cli/tests`.

#![allow(dead_code)]

mod endpoint;
mod http;
mod inputs;

// Each test file uses its own part of the support.
#[allow(unused_imports)]
pub use self::{endpoint::*, http::*, inputs::*};

use std::net::TcpListener;
use std::ops::Deref;
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rinfer_serve::{ServeConfig, ServeError, model_name, serve_on};
use tokio::sync::oneshot;

/// The configuration `rinfer serve --model MODEL --ctx CTX` makes, every other option at its
/// default (no memory limit on the models).
pub fn config(model: &str, ctx: usize) -> ServeConfig {
    let path = PathBuf::from(model);
    let mut config = ServeConfig::new(path.clone(), model_name(&path));
    config.engine.context = Some(ctx);
    config
}

/// The configuration of a server of the fixture `model` with the chat template `template` (paths
/// in the fixtures), a context of `ctx`, on 2 threads.
pub fn templated_config(model: &str, template: &str, ctx: usize) -> ServeConfig {
    let mut config = config(&fixture(model), ctx);
    config.chat_template = Some(fixture(template));
    config.engine.threads = Some(2);
    config
}

/// A server of the tiny model on 2 threads with a context of 512, configured further by
/// `configure`.
pub fn tiny_server(configure: impl FnOnce(&mut ServeConfig)) -> Server {
    let mut config = config(&tiny_model(), 512);
    config.engine.threads = Some(2);
    configure(&mut config);
    Server::start(config)
}

/// A server running on a thread of the test, stopped (drained) when dropped; its [`Endpoint`]
/// by dereference.
pub struct Server {
    endpoint: Endpoint,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Deref for Server {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
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
            endpoint: Endpoint { addr },
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
            if self.is_healthy() {
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
