//! Starting one model's engine: its queue, its engine thread (which loads the model and asks
//! the budget for room), and the [`Served`] the HTTP side sees once it is ready.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::chat::{ChatFormat, max_prompt_bytes};
use crate::config::{ModelEntry, ServeConfig};
use crate::error::ServeError;
use crate::metrics::Metrics;
use crate::scheduler::{self, Ready, Started};
use crate::served::Served;
use crate::structured::StructuredOutput;

/// What every engine is started with.
pub struct Launch {
    /// The engine options, queue size and chat template of every model.
    pub config: ServeConfig,
    /// Counters for `/metrics`, shared by the engines.
    pub metrics: Arc<Metrics>,
    /// Set at shutdown: every engine stops once idle.
    pub stop: Arc<AtomicBool>,
}

impl Launch {
    /// Starts `model`'s engine and waits until it is ready. `admit` is asked, once the model is
    /// loaded and before its caches are allocated, whether it may stay.
    pub async fn start(
        &self,
        model: &ModelEntry,
        admit: impl FnOnce(&Ready) -> Result<(), ServeError> + Send + 'static,
    ) -> Result<Served, ServeError> {
        let (jobs, job_receiver) = std::sync::mpsc::sync_channel(self.config.queue);
        let (started_tx, started_rx) = oneshot::channel();
        let engine = scheduler::spawn(
            self.config.engine_for(model),
            job_receiver,
            Arc::clone(&self.metrics),
            Arc::clone(&self.stop),
            admit,
            started_tx,
        )?;
        let Started { ready, device } =
            started_rx.await.map_err(|_| ServeError::EngineStopped)??;
        let chat = ChatFormat::for_model(
            &ready.loaded,
            self.config.chat_template.as_deref(),
            self.config.template_process.as_ref(),
            max_prompt_bytes(&ready.loaded.tokenizer, ready.settings.context),
        )
        .map_err(|e| ServeError::Config(e.to_string()))?;
        Ok(Served {
            ready,
            device,
            chat,
            model_id: model.id.clone(),
            structured: StructuredOutput::new(),
            jobs,
            engine: Mutex::new(Some(engine)),
        })
    }
}
