//! The command line's side of the library's engine setup ([`EngineSetup`]): the default model
//! when none is named, and what the commands report about the engine on stderr.

use std::path::PathBuf;

use anyhow::{Context, Result};
use rinfer_model::{Engine, EngineOptions, EngineSettings, EngineSetup, NvrtcSearch, Speculation};

use crate::commands::fetch::default_model_path_or_fetch;
use crate::commands::pull::resolve_model;
use crate::options::{EngineArgs, RunArgs, SessionArgs, SpeculationOptions};
use crate::stderr::report;

/// The model named on the command line (a path, or a hub model `org/repo[:QUANT]` from the
/// cache), or the default model.
pub fn model_path(model: &Option<PathBuf>) -> Result<PathBuf> {
    match model {
        Some(path) => resolve_model(path),
        None => default_model_path_or_fetch(),
    }
}

/// The engine options `args` and `speculation` give, for one sequence (the default model
/// fetched when none is named).
pub fn engine_options(
    args: &EngineArgs,
    speculation: Option<&SpeculationOptions>,
) -> Result<EngineOptions> {
    run_options(model_path(&args.model)?, &args.run, speculation)
}

/// The engine options of `model` that `args` and `speculation` give, for one sequence.
pub fn run_options(
    model: PathBuf,
    args: &RunArgs,
    speculation: Option<&SpeculationOptions>,
) -> Result<EngineOptions> {
    let (speculation, draft_model) = match speculation {
        Some(options) => (options.speculation()?, options.draft_model.clone()),
        None => (Speculation::Off, None),
    };
    Ok(EngineOptions {
        draft_model,
        context: args.ctx,
        threads: args.threads,
        device: args.device.unwrap_or_default(),
        nvrtc: NvrtcSearch::from_variables(|name| std::env::var_os(name)),
        kv_cache_mib: args.kv_cache_mib,
        kv_type: args.kv_type,
        speculation,
        ..EngineOptions::new(model)
    })
}

/// A loaded model (and draft model) and how the command line wants it run.
pub struct Session {
    /// The models and the engine's settings.
    pub setup: EngineSetup,
    /// Whether `--device` was given.
    device_named: bool,
    verbose: bool,
    /// The compute pool whose worker 0 is this thread, alive while the engine runs.
    _pool: rayon::ThreadPool,
}

impl Session {
    /// Starts the compute pool and loads the models `options` name.
    pub fn start(args: &SessionArgs, options: &EngineOptions) -> Result<Self> {
        let pool = options.compute_pool()?;
        let setup = EngineSetup::load(options)?;
        Ok(Self {
            setup,
            device_named: args.engine.run.device.is_some(),
            verbose: args.verbose,
            _pool: pool,
        })
    }

    /// The context size in tokens.
    pub fn context(&self) -> usize {
        self.setup.settings.context
    }

    /// The engine of the setup's settings.
    pub fn engine(&self) -> Result<Engine<'_>> {
        self.engine_with(self.setup.settings)
    }

    /// An engine of `settings` on the device `--device` chose. The device is reported on
    /// stderr when a GPU was asked for or found, or with `--verbose`, which also names the CPU
    /// kernel set this CPU runs (e.g. `avx512`, `NEON + dotprod + i8mm`) and prints the memory
    /// plan.
    pub fn engine_with(&self, settings: EngineSettings) -> Result<Engine<'_>> {
        let engine = self.setup.engine_with(settings).with_context(|| {
            format!(
                "cannot start the engine (--ctx {}, --device {})",
                settings.context, self.setup.device.request
            )
        })?;
        let on_gpu = engine.device().kind() == "cuda";
        if self.verbose || self.device_named || on_gpu {
            report!("device: {}", engine.device());
            if let Some(draft) = engine.draft_device() {
                report!("draft model's device: {draft}");
            }
        }
        if self.verbose {
            let isa = rinfer_kernels::Kernels::detected().isa();
            report!("cpu kernels: {}", isa.name());
            self.print_memory_plan(&engine);
        }
        Ok(engine)
    }

    fn print_memory_plan(&self, engine: &Engine<'_>) {
        let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
        let weights = self.setup.loaded.model.weights.bytes_by_type();
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
                "  draft model's KV cache (on its device) and buffers: {:.1} MiB",
                mib(engine.draft_bytes())
            );
        }
        report!(
            "  prefix cache (grows as used): at most {:.1} MiB",
            mib(engine.prefix_stats().budget)
        );
    }
}
