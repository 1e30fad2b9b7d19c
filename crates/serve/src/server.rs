//! Starting, running and stopping the server: bind first, load on the engine thread, serve,
//! and on SIGTERM or Ctrl-C stop accepting, finish the requests in flight, stop the engine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::chat::ChatFormat;
use crate::config::ServeConfig;
use crate::error::{ApiError, ServeError};
use crate::metrics::Metrics;
use crate::scheduler::job::Job;
use crate::scheduler::{self, Ready};

/// How long in-flight requests may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Threads of the async runtime: it only parses, tokenizes and relays; the engine computes.
const RUNTIME_THREADS: usize = 2;

/// The model as the HTTP side sees it once loaded.
pub struct Served {
    /// The model and engine sizes.
    pub ready: Arc<Ready>,
    /// How chat requests become prompts.
    pub chat: ChatFormat,
    /// The id clients name.
    pub model_id: String,
}

/// What every handler shares.
pub struct AppState {
    /// The configuration.
    pub config: ServeConfig,
    /// Set once the engine has loaded the model.
    pub served: OnceLock<Arc<Served>>,
    /// The engine's bounded queue.
    pub jobs: SyncSender<Job>,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Set when a shutdown signal arrived: no new generations, `/health` says 503.
    pub draining: AtomicBool,
    /// The engine thread (taken at shutdown to join it).
    pub engine: Mutex<Option<JoinHandle<()>>>,
    /// Unix seconds the server started.
    pub started: u64,
}

impl AppState {
    /// The loaded model, or 503 while it loads.
    pub fn served(&self) -> Result<Arc<Served>, ApiError> {
        self.served
            .get()
            .cloned()
            .ok_or_else(|| ApiError::unavailable("the model is still loading", 2))
    }

    /// Whether the engine thread has ended (it only does at shutdown, or if it failed).
    pub fn engine_stopped(&self) -> bool {
        self.engine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(JoinHandle::is_finished)
    }
}

/// Serves `config` until SIGTERM or Ctrl-C (then drains) or until the model fails to load.
/// Blocks the calling thread; starts its own async runtime and engine thread.
///
/// ```no_run
/// use rinfer_serve::{ServeConfig, serve};
///
/// let config = ServeConfig {
///     parallel: 8,
///     ..ServeConfig::new("gemma-3-270m-q4_k_m.gguf".into(), "gemma-3-270m-q4_k_m".into())
/// };
/// serve(config)?;
/// # Ok::<(), rinfer_serve::ServeError>(())
/// ```
pub fn serve(config: ServeConfig) -> Result<(), ServeError> {
    if config.parallel == 0 || config.queue == 0 {
        return Err(ServeError::Config(
            "--parallel and --queue must be at least 1".into(),
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_THREADS)
        .enable_all()
        .build()?;
    runtime.block_on(run(config))
}

async fn run(config: ServeConfig) -> Result<(), ServeError> {
    let listener = TcpListener::bind(config.address)
        .await
        .map_err(|source| ServeError::Bind {
            address: config.address,
            source,
        })?;
    let address = listener.local_addr()?;
    tracing::info!("listening on http://{address}");

    let (jobs, job_receiver) = std::sync::mpsc::sync_channel(config.queue);
    let metrics = Arc::new(Metrics::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (loaded_tx, loaded_rx) = oneshot::channel();
    let engine = scheduler::spawn(
        &config,
        job_receiver,
        Arc::clone(&metrics),
        Arc::clone(&stop),
        loaded_tx,
    )?;
    let state = Arc::new(AppState {
        config: config.clone(),
        served: OnceLock::new(),
        jobs,
        metrics,
        draining: AtomicBool::new(false),
        engine: Mutex::new(Some(engine)),
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    });

    let (failed_tx, failed_rx) = oneshot::channel::<ServeError>();
    let loader_state = Arc::clone(&state);
    tokio::spawn(async move {
        let error = match loaded_rx.await {
            Ok(Ok(ready)) => match served(&loader_state.config, ready) {
                Ok(served) => {
                    tracing::info!(
                        model = %served.model_id,
                        chat_template = %served.chat.source(),
                        "model loaded; ready"
                    );
                    let _ = loader_state.served.set(Arc::new(served));
                    return;
                }
                Err(e) => e,
            },
            Ok(Err(e)) => e,
            Err(_) => ServeError::EngineStopped,
        };
        let _ = failed_tx.send(error);
    });

    let draining = Arc::new(tokio::sync::Notify::new());
    let signal_state = Arc::clone(&state);
    let signal_draining = Arc::clone(&draining);
    let (load_error_tx, mut load_error_rx) = oneshot::channel();
    let shutdown = async move {
        tokio::select! {
            () = shutdown_signal() => tracing::info!("shutdown signal: draining requests in flight"),
            Ok(error) = failed_rx => { let _ = load_error_tx.send(error); }
        }
        signal_state.draining.store(true, Ordering::Relaxed);
        signal_draining.notify_one();
    };
    let app = crate::routes::router(Arc::clone(&state));
    let server = axum::serve(listener, app).with_graceful_shutdown(shutdown);
    let deadline = async {
        draining.notified().await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        result = server => result?,
        () = deadline => tracing::warn!("requests still running after {DRAIN_TIMEOUT:?}; stopping anyway"),
    }
    stop.store(true, Ordering::Relaxed);
    let engine = state
        .engine
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    drop(state);
    if let Ok(error) = load_error_rx.try_recv() {
        return Err(error);
    }
    let engine_result = tokio::task::spawn_blocking(move || engine.map(JoinHandle::join)).await;
    if !matches!(engine_result, Ok(Some(Ok(())))) {
        return Err(ServeError::EngineStopped);
    }
    tracing::info!("stopped");
    Ok(())
}

fn served(config: &ServeConfig, ready: Arc<Ready>) -> Result<Served, ServeError> {
    let chat = ChatFormat::for_model(&ready.loaded, config.chat_template.as_deref())
        .map_err(|e| ServeError::Config(e.to_string()))?;
    Ok(Served {
        ready,
        chat,
        model_id: config.model_id.clone(),
    })
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
