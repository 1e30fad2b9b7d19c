//! Turning the shared engine options into a loaded model and a thread pool.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use rinfer_cuda::{DeviceReport, DeviceRequest};
use rinfer_model::{LoadedModel, SamplingParams};

use crate::backend::Backend;

use crate::commands::fetch::default_model_path_or_fetch;
use crate::options::{EngineOptions, SamplingOptions};

/// The largest context used when the user gives none.
const DEFAULT_CONTEXT: usize = 4096;
/// Tokens per prefill batch.
pub const PREFILL_BATCH: usize = 512;

/// The model file named on the command line, or the default model.
pub fn model_path(model: &Option<PathBuf>) -> Result<PathBuf> {
    match model {
        Some(path) => Ok(path.clone()),
        None => default_model_path_or_fetch(),
    }
}

/// A model ready to run, with its load time.
pub struct Engine {
    /// The model, tokenizer and template.
    pub loaded: LoadedModel,
    /// Seconds spent loading.
    pub load_s: f64,
    /// The context size in tokens.
    pub context: usize,
    /// The device `--device` asked for.
    pub device: DeviceRequest,
}

impl Engine {
    /// Sets up the thread pool and loads the model.
    pub fn start(options: &EngineOptions) -> Result<Self> {
        if let Some(threads) = options.threads {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads.max(1))
                .build_global()
                .context("cannot start the thread pool")?;
        }
        let path = model_path(&options.model)?;
        let start = Instant::now();
        let loaded =
            LoadedModel::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
        let load_s = start.elapsed().as_secs_f64();
        let trained = loaded.model.config.context_length;
        let context = options.ctx.unwrap_or(trained.min(DEFAULT_CONTEXT)).max(1);
        Ok(Self {
            loaded,
            load_s,
            context,
            device: options.device,
        })
    }

    /// The compute state of one sequence on the device `--device` chose, and that device.
    pub fn backend(&self) -> Result<(Backend, DeviceReport)> {
        let batch = PREFILL_BATCH.min(self.context);
        Backend::start(self, self.context, batch, false)
    }
}

/// The sampling parameters the options describe.
pub fn sampling_params(options: &SamplingOptions) -> SamplingParams {
    SamplingParams {
        temperature: options.temperature,
        top_k: options.top_k,
        top_p: options.top_p,
        min_p: options.min_p,
        repeat_penalty: options.repeat_penalty,
        seed: options.seed,
        ..SamplingParams::default()
    }
}
