//! What the request handlers share: a loaded model as the HTTP side sees it, and the server's
//! state.

use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rinfer_model::DeviceReport;
use tokio::sync::watch;

use crate::blocking::BlockingJobs;
use crate::chat::ChatFormat;
use crate::config::ServeConfig;
use crate::metrics::Metrics;
use crate::models::Models;
use crate::scheduler::Ready;
use crate::scheduler::job::Job;
use crate::structured::StructuredOutput;

/// A model as the HTTP side sees it once loaded, with its engine.
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
    /// The engine's bounded queue; dropping the last sender (unloading the model) lets the
    /// engine thread end once idle.
    pub jobs: SyncSender<Job>,
    /// The engine thread (taken at shutdown to join it).
    pub engine: Mutex<Option<JoinHandle<()>>>,
}

impl Served {
    /// Refuses a generation request for an encoder, which makes embeddings only.
    pub fn check_generates(&self) -> Result<(), crate::error::ApiError> {
        if self.ready.loaded.model.config.causal {
            return Ok(());
        }
        Err(crate::error::ApiError::invalid(
            "model",
            format!(
                "the model `{}` is an encoder: it makes embeddings (/v1/embeddings), not text",
                self.model_id
            ),
        ))
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

/// What every handler shares.
pub struct AppState {
    /// The configuration.
    pub config: ServeConfig,
    /// The models served, loaded or not: where every request finds its model.
    pub models: Arc<Models>,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Turns true when a shutdown signal arrived: no new generations, `/health` says 503,
    /// bodies still arriving are cut.
    pub drain: watch::Sender<bool>,
    /// Where requests parse and tokenize.
    pub blocking: BlockingJobs,
    /// Unix seconds the server started.
    pub started: u64,
    /// Responses kept for `/v1/responses` continuations and `GET`.
    pub responses: crate::response_store::ResponseStore,
}

impl AppState {
    /// The model the request `body` names in its `model` field (the default model when it
    /// names none), loaded first when it is not: 404 for a name not served, 503 while it
    /// cannot be loaded. Every API finds its model here.
    pub async fn served(&self, body: &[u8]) -> Result<Arc<Served>, crate::error::ApiError> {
        self.models.for_request(body).await
    }

    /// Whether the server is draining.
    pub fn draining(&self) -> bool {
        *self.drain.borrow()
    }
}
