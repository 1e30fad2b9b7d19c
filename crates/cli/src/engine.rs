//! Turning the shared engine options into a loaded model and a thread pool.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use rinfer_cuda::{DeviceReport, DeviceRequest};
use rinfer_model::{KvCache, LoadedModel, SamplingParams, Scratch};

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
    /// Whether to print the memory plan.
    verbose: bool,
}

impl Engine {
    /// Sets up the thread pool and loads the model.
    ///
    /// The calling thread joins the pool as one of its workers, so the forward passes it starts
    /// queue their jobs in its own deque (no hand-off to another thread, no allocation).
    pub fn start(options: &EngineOptions) -> Result<Self> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads.unwrap_or(0))
            .use_current_thread()
            .build_global()
            .context("cannot start the thread pool")?;
        let path = model_path(&options.model)?;
        let start = Instant::now();
        let loaded =
            LoadedModel::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
        let load_s = start.elapsed().as_secs_f64();
        let trained = loaded.model.config.context_length;
        let context = options.ctx.unwrap_or(trained.min(DEFAULT_CONTEXT)).max(1);
        crate::limits::check_run_fits(&loaded.model, context, 1, PREFILL_BATCH.min(context), 1)?;
        Ok(Self {
            loaded,
            load_s,
            context,
            device: options.device,
            verbose: options.verbose,
        })
    }

    /// The compute state of one sequence on the device `--device` chose, and that device.
    pub fn backend(&self) -> Result<(Backend, DeviceReport)> {
        let batch = PREFILL_BATCH.min(self.context);
        Backend::start(self, self.context, batch, false)
    }

    /// A CPU KV cache and scratch buffers for one sequence, fed `batch` tokens at a time;
    /// `all_logits`: every position's logits are wanted, else only the last one's.
    pub fn cpu_buffers(
        &self,
        context: usize,
        batch: usize,
        all_logits: bool,
    ) -> (KvCache, Scratch) {
        let config = &self.loaded.model.config;
        let logit_rows = if all_logits { batch } else { 1 };
        let (cache, scratch) = (
            KvCache::new(config, context, batch),
            Scratch::with_logit_rows(config, batch, logit_rows),
        );
        if self.verbose {
            self.print_memory_plan(&cache, &scratch);
        }
        (cache, scratch)
    }

    fn print_memory_plan(&self, cache: &KvCache, scratch: &Scratch) {
        let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
        let weights = self.loaded.model.weights.bytes_by_type();
        let total: usize = weights.iter().map(|(_, b)| b).sum();
        eprintln!("memory plan:");
        eprintln!(
            "  weights (memory-mapped, not copied): {:.1} MiB",
            mib(total)
        );
        for (ty, bytes) in weights {
            eprintln!("    {:<8} {:>10.1} MiB", ty.name(), mib(bytes));
        }
        eprintln!(
            "  KV cache (f32, {} positions): {:.1} MiB",
            cache.context(),
            mib(cache.bytes())
        );
        eprintln!("  scratch buffers: {:.1} MiB", mib(scratch.bytes()));
    }
}

/// The sampling parameters the options describe.
pub fn sampling_params(options: &SamplingOptions) -> SamplingParams {
    options.params()
}
