//! A loaded model as the HTTP side sees it, with its engine.

use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rinfer_model::DeviceReport;

use crate::chat::ChatFormat;
use crate::error::ApiError;
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

    /// Whether the engine thread has ended (it only does at shutdown, or if it failed).
    pub fn engine_stopped(&self) -> bool {
        self.engine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(JoinHandle::is_finished)
    }
}
