//! Turning the shared engine options into a thread pool, a loaded model and the library's
//! [`Engine`] on the chosen device.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use rinfer_model::{DeviceRequest, Engine, EngineSettings, LoadedModel};

use crate::commands::fetch::default_model_path_or_fetch;
use crate::commands::pull::resolve_model;
use crate::options::{EngineOptions, SpeculationOptions};
use crate::stderr::report;

/// The largest context used when the user gives none.
const DEFAULT_CONTEXT: usize = 4096;

/// The model named on the command line (a path, or a hub model `org/repo[:QUANT]` from the
/// cache), or the default model.
pub fn model_path(model: &Option<PathBuf>) -> Result<PathBuf> {
    match model {
        Some(path) => resolve_model(path),
        None => default_model_path_or_fetch(),
    }
}

/// The draft model `--draft-model` names, loaded (`None` without one); the engine checks that
/// it shares the model's vocabulary.
pub fn load_draft(options: &SpeculationOptions) -> Result<Option<LoadedModel>> {
    let Some(path) = &options.draft_model else {
        return Ok(None);
    };
    let path = &resolve_model(path)?;
    let draft = LoadedModel::open(path)
        .with_context(|| format!("cannot load the draft model {}", path.display()))?;
    Ok(Some(draft))
}

/// A loaded model and how the command line wants it run.
pub struct Session {
    /// The model, tokenizer and template.
    pub loaded: LoadedModel,
    /// Seconds spent loading.
    pub load_s: f64,
    /// The context size in tokens.
    pub context: usize,
    options: EngineOptions,
}

impl Session {
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
        Ok(Self {
            loaded,
            load_s,
            context,
            options: options.clone(),
        })
    }

    /// An engine of the given sizes on the device `--device` chose, with the draft model
    /// `draft` when it speculates with one. The device is reported on stderr when a GPU was
    /// asked for or found, or with `--verbose`.
    /// `--kv-cache-mib` sets the prefix cache's budget, `--kv-type` the KV cache's type.
    pub fn engine_with<'s>(
        &'s self,
        settings: EngineSettings,
        draft: Option<&'s LoadedModel>,
    ) -> Result<Engine<'s>> {
        let settings = EngineSettings {
            kv_type: self.options.kv_type.or(settings.kv_type),
            prefix_cache_bytes: self
                .options
                .kv_cache_mib
                .map_or(settings.prefix_cache_bytes, |mib| mib << 20),
            ..settings
        };
        let request = self.options.device.unwrap_or(DeviceRequest::Auto);
        let engine =
            Engine::with_draft(&self.loaded, draft, settings, request).with_context(|| {
                format!(
                    "cannot start the engine (--ctx {}, --device {request})",
                    settings.context
                )
            })?;
        let on_gpu = engine.device().kind() == "cuda";
        if self.options.verbose || self.options.device.is_some() || on_gpu {
            report!("device: {}", engine.device());
        }
        if self.options.verbose {
            self.print_memory_plan(&engine);
        }
        Ok(engine)
    }

    fn print_memory_plan(&self, engine: &Engine<'_>) {
        let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
        let weights = self.loaded.model.weights.bytes_by_type();
        let total: usize = weights.iter().map(|(_, b)| b).sum();
        report!("memory plan:");
        report!(
            "  weights (memory-mapped, not copied): {:.1} MiB",
            mib(total)
        );
        for (ty, bytes) in weights {
            report!("    {:<8} {:>10.1} MiB", ty.name(), mib(bytes));
        }
        report!(
            "  KV cache ({}, {} positions): {:.1} MiB",
            engine.kv_type(),
            engine.settings().context,
            mib(engine.kv_bytes())
        );
        report!("  scratch buffers: {:.1} MiB", mib(engine.scratch_bytes()));
        if engine.draft_bytes() > 0 {
            report!(
                "  draft model's KV cache and buffers: {:.1} MiB",
                mib(engine.draft_bytes())
            );
        }
        report!(
            "  prefix cache (grows as used): at most {:.1} MiB",
            mib(engine.prefix_stats().budget)
        );
    }
}
