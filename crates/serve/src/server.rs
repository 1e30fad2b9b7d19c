//! Starting, running and stopping the server: bind first, load the models that load at start
//! (each on its engine thread), serve, and on SIGTERM or Ctrl-C (or, for [`serve_on`], when
//! the caller's shutdown future resolves) drain (finish the requests in flight while `/health`
//! answers 503), stop accepting, stop the engines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use crate::blocking::BlockingJobs;
use crate::config::ServeConfig;
use crate::connections::{self, ConnectionLimits};
use crate::error::ServeError;
use crate::metrics::Metrics;
use crate::models::{Launch, Models};
use crate::request_policy::RequestPolicy;
use crate::state::AppState;

/// How long in-flight requests may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Threads of the async runtime: it only parses, tokenizes and relays; the engine computes.
const RUNTIME_THREADS: usize = 2;
/// How long blocking request work still running at exit may delay it.
const EXIT_TIMEOUT: Duration = Duration::from_secs(1);

/// Serves `config` until SIGTERM or Ctrl-C (then drains) or until a model that loads at start
/// fails to load.
/// Blocks the calling thread; starts its own async runtime and engine thread.
///
/// ```no_run
/// use rinfer_serve::{ServeConfig, serve};
///
/// let mut config =
///     ServeConfig::new("gemma-3-270m-q4_k_m.gguf".into(), "gemma-3-270m-q4_k_m".into());
/// config.engine.sequences = 8;
/// serve(config)?;
/// # Ok::<(), rinfer_serve::ServeError>(())
/// ```
pub fn serve(config: ServeConfig) -> Result<(), ServeError> {
    check(&config)?;
    in_runtime(async {
        let listener =
            TcpListener::bind(config.address)
                .await
                .map_err(|source| ServeError::Bind {
                    address: config.address,
                    source,
                })?;
        run(listener, config, shutdown_signal()).await
    })
}

/// Serves `config` on `listener`, already bound by the caller (`config.address` is not used),
/// until `shutdown` resolves (then drains as on a signal) or until a model that loads at start
/// fails to load. This is how a program runs the server inside itself, on an address it chose,
/// and stops it when it wants: it listens to no signal.
/// Blocks the calling thread; starts its own async runtime and engine thread.
///
/// ```no_run
/// use rinfer_serve::{ServeConfig, serve_on};
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// println!("serving on http://{}", listener.local_addr()?);
/// let config = ServeConfig::new("gemma-3-270m-q4_k_m.gguf".into(), "gemma".into());
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = std::thread::spawn(move || {
///     serve_on(listener, config, async {
///         let _ = stopped.await;
///     })
/// });
/// // ... requests ...
/// let _ = stop.send(());
/// server.join().expect("the server thread ends")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serve_on(
    listener: std::net::TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    check(&config)?;
    listener.set_nonblocking(true)?;
    in_runtime(async {
        let listener = TcpListener::from_std(listener)?;
        run(listener, config, shutdown).await
    })
}

/// Runs `server` to its end on a runtime of its own.
fn in_runtime(server: impl Future<Output = Result<(), ServeError>>) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_THREADS)
        .enable_all()
        .build()?;
    let result = runtime.block_on(server);
    // A tokenization whose client is gone may still be finishing on the blocking pool.
    runtime.shutdown_timeout(EXIT_TIMEOUT);
    result
}

/// The settings checks that need no model.
fn check(config: &ServeConfig) -> Result<(), ServeError> {
    config.validate().map_err(ServeError::Config)?;
    if config.max_connections == 0 {
        return Err(ServeError::Config(
            "--max-connections must be at least 1".into(),
        ));
    }
    if config.header_timeout.is_zero()
        || config.body_timeout.is_zero()
        || config.write_timeout.is_zero()
    {
        return Err(ServeError::Config(
            "--header-timeout, --body-timeout and --write-timeout must be above 0".into(),
        ));
    }
    Ok(())
}

async fn run(
    listener: TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let address = listener.local_addr()?;
    tracing::info!("listening on http://{address}");
    if !config.api_keys.is_empty() {
        tracing::info!(
            "{} API keys: API requests must carry one as `Authorization: Bearer KEY` or `x-api-key: KEY`",
            config.api_keys.len()
        );
    }

    let metrics = Arc::new(Metrics::default());
    let stop = Arc::new(AtomicBool::new(false));
    let models = Arc::new(Models::new(Launch {
        config: config.clone(),
        metrics: Arc::clone(&metrics),
        stop: Arc::clone(&stop),
    }));
    let state = Arc::new(AppState {
        config: config.clone(),
        models: Arc::clone(&models),
        metrics,
        drain: watch::Sender::new(false),
        blocking: BlockingJobs::per_core(),
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        responses: crate::response_store::ResponseStore::default(),
    });
    let (failed_tx, failed_rx) = oneshot::channel::<ServeError>();
    models.load_at_start(failed_tx);

    let (load_error_tx, mut load_error_rx) = oneshot::channel();
    let signal_state = Arc::clone(&state);
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown => tracing::info!("shutdown signal: draining requests in flight"),
            Ok(error) = failed_rx => { let _ = load_error_tx.send(error); }
        }
        signal_state.drain.send_replace(true);
    });
    let policy = Arc::new(RequestPolicy::new(&config, address));
    // The other APIs' routes, keyed like OpenAI's; errors on Anthropic's paths in its shape.
    let apis = crate::anthropic::routes()
        .merge(crate::responses::routes())
        .merge(crate::embeddings::routes())
        .merge(crate::rerank::routes());
    let app = crate::routes::router(Arc::clone(&state), policy, apis).layer(
        axum::middleware::from_fn(crate::anthropic::anthropic_errors),
    );
    let limits = ConnectionLimits {
        max_connections: connections::fit_open_file_limit(config.max_connections),
        header_timeout: config.header_timeout,
        write_timeout: config.write_timeout,
        half_close: config.half_close,
    };
    let server = connections::serve(listener, app, limits, state.drain.subscribe());
    let mut drain_started = state.drain.subscribe();
    let deadline = async {
        let _ = drain_started.wait_for(|draining| *draining).await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        () = server => {}
        () = deadline => tracing::warn!("requests still running after {DRAIN_TIMEOUT:?}; stopping anyway"),
    }
    stop.store(true, Ordering::Relaxed);
    let engines = state.models.take_engines();
    drop(state);
    drop(models);
    if let Ok(error) = load_error_rx.try_recv() {
        return Err(error);
    }
    let joined = tokio::task::spawn_blocking(move || {
        engines
            .into_iter()
            .map(JoinHandle::join)
            .all(|ended| ended.is_ok())
    })
    .await;
    if !matches!(joined, Ok(true)) {
        return Err(ServeError::EngineStopped);
    }
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
