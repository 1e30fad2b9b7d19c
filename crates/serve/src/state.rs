//! What the request handlers share: the server's state.

use std::sync::Arc;

use tokio::sync::watch;

use crate::blocking::BlockingJobs;
use crate::config::ServeConfig;
use crate::metrics::Metrics;
use crate::models::Models;
use crate::served::Served;

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
