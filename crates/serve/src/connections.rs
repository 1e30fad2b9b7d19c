//! Accepting and serving connections: at most `max_connections` at once (one more gets a 503
//! and is closed), each served by hyper with a header-read timeout and a write timeout (a
//! write that waits longer for the client to read fails, closing the connection, so a client
//! that never reads its answer holds nothing); and the drain, during which
//! the connections accepted before it finish their requests while new connections are still
//! answered (`/health` says 503), so that a load balancer sees the drain instead of a refusal.
//!
//! `axum::serve` is not used because it offers neither a header timeout nor a connection cap,
//! and its drain waits for every connection, a half-sent request included.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tower_service::Service;

use crate::error::ApiError;

/// How connections are bounded.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time to send a request's headers (and to send the next one on a keep-alive connection).
    pub header_timeout: Duration,
    /// Time a write may wait for the client to read.
    pub write_timeout: Duration,
    /// Answer clients that half-close after their request.
    pub half_close: bool,
}

/// File descriptors kept free for the model files, the runtime and the logs.
const RESERVED_FILES: usize = 64;
/// Pause after a failed `accept` (out of file descriptors): a tight retry loop would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one warning about failing `accept`s per this interval.
const ACCEPT_WARNING_INTERVAL: Duration = Duration::from_secs(5);

/// Serves `listener` until a drain (`draining` turning true) has let every connection
/// accepted before it finish; connections accepted during the drain are answered (one request
/// each) until then.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    draining: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusal = over_capacity_response();
    let (before_drain, mut before_drain_done) = mpsc::channel::<()>(1);
    let mut before_drain = Some(before_drain);
    let mut drain_started = draining.clone();
    let mut last_warning: Option<Instant> = None;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match Arc::clone(&slots).try_acquire_owned() {
                    Ok(permit) => {
                        let connection = Connection {
                            router: router.clone(),
                            limits,
                            draining: draining.clone(),
                            before_drain: before_drain.clone(),
                            _slot: permit,
                        };
                        tokio::spawn(connection.serve(stream));
                    }
                    // Never blocks: a fresh socket's send buffer holds the whole answer.
                    Err(_) => drop(stream.try_write(&refusal)),
                },
                Err(error) => {
                    if last_warning.is_none_or(|t| t.elapsed() > ACCEPT_WARNING_INTERVAL) {
                        tracing::warn!("cannot accept connections: {error}");
                        last_warning = Some(Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            _ = drain_started.wait_for(|d| *d), if before_drain.is_some() => before_drain = None,
            None = before_drain_done.recv(), if before_drain.is_none() => return,
        }
    }
}

/// `max_connections` lowered, with a warning, to what the process's open-file limit allows.
pub fn fit_open_file_limit(max_connections: usize) -> usize {
    let Some(limit) = open_file_limit() else {
        return max_connections;
    };
    let fitting = limit.saturating_sub(RESERVED_FILES).max(1);
    if fitting < max_connections {
        tracing::warn!(
            "the open-file limit is {limit}: serving at most {fitting} connections instead of \
             {max_connections} (raise it with `ulimit -n`)"
        );
        return fitting;
    }
    max_connections
}

/// The soft `RLIMIT_NOFILE`, as Linux shows it in `/proc/self/limits`.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The raw answer to a connection past the cap.
fn over_capacity_response() -> Vec<u8> {
    let body = ApiError::unavailable("the server has too many open connections", 1)
        .body()
        .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One accepted connection and what it holds while served.
struct Connection {
    router: Router,
    limits: ConnectionLimits,
    draining: watch::Receiver<bool>,
    /// Held by connections accepted before the drain: the drain waits for them.
    before_drain: Option<mpsc::Sender<()>>,
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve(mut self, stream: TcpStream) {
        // Streamed tokens go out at once, not after a delayed ACK.
        let _ = stream.set_nodelay(true);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let service = RequestCounting {
            router: self.router.clone(),
            in_flight: Arc::clone(&in_flight),
        };
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_timeout)
            .half_close(self.limits.half_close)
            // Accepted during the drain: one request, then closed.
            .keep_alive(self.before_drain.is_some());
        let stream = WriteTimeout::new(stream, self.limits.write_timeout);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let mut connection = std::pin::pin!(connection);
        if self.before_drain.is_some() {
            tokio::select! {
                result = connection.as_mut() => return log_end(result),
                _ = self.draining.wait_for(|d| *d) => {}
            }
            if in_flight.load(Ordering::Acquire) == 0 {
                // Idle, or still sending its headers: nothing to finish.
                return;
            }
            connection.as_mut().graceful_shutdown();
        }
        log_end(connection.await);
    }
}

/// A stream whose writes fail with `TimedOut` once one has waited `timeout` for the peer to
/// make room (read).
struct WriteTimeout<S> {
    inner: S,
    timeout: Duration,
    /// Set while a write waits.
    waiting: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteTimeout<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            waiting: None,
        }
    }

    /// `poll` result after a write or flush returned `result`: a pending one arms the timer,
    /// and fails once the timer has run out.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.waiting = None;
            return result;
        }
        let timeout = self.timeout;
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing within the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        self.bounded(cx, result)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.bounded(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let result = std::pin::Pin::new(&mut self.inner).poll_flush(cx);
        self.bounded(cx, result)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!("connection ended: {error}");
    }
}

/// The router, counting the requests of its connection from their headers to the last byte of
/// their response.
#[derive(Clone)]
struct RequestCounting {
    router: Router,
    in_flight: Arc<AtomicUsize>,
}

impl hyper::service::Service<Request<Incoming>> for RequestCounting {
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send>,
    >;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let guard = InFlight::enter(&self.in_flight);
        let mut router = self.router.clone();
        Box::pin(async move {
            let response = router.call(request.map(Body::new)).await?;
            Ok(response.map(|body| {
                Body::new(CountedBody {
                    body,
                    _guard: guard,
                })
            }))
        })
    }
}

/// One request counted in flight until dropped.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(counter))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted until it is written or dropped.
struct CountedBody {
    body: Body,
    _guard: InFlight,
}

impl HttpBody for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_http_response() {
        let raw = String::from_utf8(over_capacity_response()).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(json["error"]["message"].is_string());
    }

    #[tokio::test]
    async fn a_write_the_peer_never_reads_fails_at_the_timeout() {
        use tokio::io::AsyncWriteExt;
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut stream = WriteTimeout::new(ours, Duration::from_millis(200));
        let started = Instant::now();
        let big = vec![0u8; 4096];
        let error = stream.write_all(&big).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn the_connection_cap_fits_the_open_file_limit() {
        if let Some(limit) = open_file_limit() {
            assert!(fit_open_file_limit(usize::MAX) <= limit);
        }
        assert!(fit_open_file_limit(1) == 1);
    }
}
