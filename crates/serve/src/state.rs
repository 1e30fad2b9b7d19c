//! What the request handlers share: the loaded model as the HTTP side sees it, and the
//! server's state.

use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use rinfer_model::DeviceReport;
use tokio::sync::watch;

use crate::blocking::BlockingJobs;
use crate::chat::ChatFormat;
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::scheduler::Ready;
use crate::scheduler::job::Job;
use crate::structured::StructuredOutput;

/// The model as the HTTP side sees it once loaded.
pub struct Served {
    /// The model and engine sizes.
    pub ready: Arc<Ready>,
    /// Where the engine computes, and why.
    pub device: DeviceReport,
    /// How chat requests become prompts.
    pub chat: ChatFormat,
    /// The id clients name.
    pub model_id: String,
    /// Constrained decoding for `response_format`.
    pub structured: StructuredOutput,
}

impl Served {
    /// Refuses a generation request for an encoder, which makes embeddings only.
    pub fn check_generates(&self) -> Result<(), ApiError> {
        if self.ready.loaded.model.config.causal {
            return Ok(());
        }
        Err(ApiError::invalid(
            "model",
            format!(
                "the model `{}` is an encoder: it makes embeddings (/v1/embeddings), not text",
                self.model_id
            ),
        ))
    }
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
    /// Turns true when a shutdown signal arrived: no new generations, `/health` says 503,
    /// bodies still arriving are cut.
    pub drain: watch::Sender<bool>,
    /// Where requests parse and tokenize.
    pub blocking: BlockingJobs,
    /// The engine thread (taken at shutdown to join it).
    pub engine: Mutex<Option<JoinHandle<()>>>,
    /// Unix seconds the server started.
    pub started: u64,
    /// Responses kept for `/v1/responses` continuations and `GET`.
    pub responses: crate::response_store::ResponseStore,
}

impl AppState {
    /// The loaded model, or 503 while it loads.
    pub fn served(&self) -> Result<Arc<Served>, ApiError> {
        self.served
            .get()
            .cloned()
            .ok_or_else(|| ApiError::unavailable("the model is still loading", 2))
    }

    /// Whether the server is draining.
    pub fn draining(&self) -> bool {
        *self.drain.borrow()
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
