//! Setting an engine up from the options every front end shares: the compute pool, the model
//! and its draft, the context, the device, the KV cache's type and budget, and speculation.
//!
//! A front end parses its flags once into [`EngineOptions`], starts the pool
//! ([`EngineOptions::compute_pool`]), loads ([`EngineSetup::load`]) and builds its engine
//! ([`EngineSetup::engine`]); what it adds is I/O and policy, never its own defaults.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{Device, DeviceRequest, Engine, EngineSettings, KvType, NvrtcSearch, Speculation};
use crate::error::ModelError;
use crate::loaded::LoadedModel;

/// The context of each sequence when the options give none: the model's trained context, at
/// most this many positions.
pub const DEFAULT_CONTEXT: usize = 4096;

/// How to set an engine up: the options `rinfer run`, `chat`, `logits` and `serve` share.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    /// The model: a GGUF file or a Hugging Face model directory.
    pub model: PathBuf,
    /// The draft model that guesses for [`Speculation::DraftModel`]; it must share the model's
    /// vocabulary.
    pub draft_model: Option<PathBuf>,
    /// Sequences decoded together, each with its own KV cache.
    pub sequences: usize,
    /// Positions of each sequence (`None`: the model's trained context, at most
    /// [`DEFAULT_CONTEXT`]).
    pub context: Option<usize>,
    /// Threads of the compute pool (`None`: one per core).
    pub threads: Option<usize>,
    /// Where to compute (`Auto`: the GPU when one is usable, else the CPU).
    pub device: DeviceRequest,
    /// Where NVRTC is looked for when a GPU is set up (the program's environment, which the
    /// program reads once; the default: the usual install folders).
    pub nvrtc: NvrtcSearch,
    /// The prefix cache's budget in MiB (`None`: the settings' default, see
    /// [`EngineSettings::default_prefix_cache_bytes`]).
    pub kv_cache_mib: Option<usize>,
    /// The type of the KV caches' rows (`None`: the device's default).
    pub kv_type: Option<KvType>,
    /// Whether decoding guesses tokens ahead (the text is the same either way).
    pub speculation: Speculation,
}

/// Why an engine could not be set up from its options.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The compute pool could not be started.
    #[error("cannot start the compute pool")]
    Pool(#[source] rayon::ThreadPoolBuildError),
    /// The model could not be loaded.
    #[error("cannot load {}", path.display())]
    Load {
        /// The model's path.
        path: PathBuf,
        /// Why (boxed: a load error names files and values, and results carry it by value).
        source: Box<ModelError>,
    },
    /// The draft model could not be loaded.
    #[error("cannot load the draft model {}", path.display())]
    Draft {
        /// The draft model's path.
        path: PathBuf,
        /// Why.
        source: Box<ModelError>,
    },
}

impl EngineOptions {
    /// One sequence of `model` on the device `Auto` chooses, every other option its default.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        Self {
            model: model.into(),
            draft_model: None,
            sequences: 1,
            context: None,
            threads: None,
            device: DeviceRequest::Auto,
            nvrtc: NvrtcSearch::default(),
            kv_cache_mib: None,
            kv_type: None,
            speculation: Speculation::Off,
        }
    }

    /// The compute pool of [`EngineOptions::threads`] workers, the calling thread its worker 0:
    /// the forward passes that thread starts queue their jobs in its own deque (no hand-off to
    /// another thread, no allocation). Keep it alive while the engine runs, on this thread.
    ///
    /// # Errors
    ///
    /// [`SetupError::Pool`] when the threads cannot be started.
    pub fn compute_pool(&self) -> Result<rayon::ThreadPool, SetupError> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads.unwrap_or(0))
            .use_current_thread()
            .build()
            .map_err(SetupError::Pool)
    }

    /// `base` with what these options set: the KV cache's type and the prefix cache's budget
    /// where given, and the speculation.
    pub fn settings(&self, base: EngineSettings) -> EngineSettings {
        EngineSettings {
            kv_type: self.kv_type.or(base.kv_type),
            prefix_cache_bytes: self
                .kv_cache_mib
                .map_or(base.prefix_cache_bytes, |mib| mib << 20),
            speculation: self.speculation,
            ..base
        }
    }
}

/// The models an engine runs, loaded, and the settings and device the options give it.
pub struct EngineSetup {
    /// The model, tokenizer and template.
    pub loaded: LoadedModel,
    /// The draft model, when the options speculate with one.
    pub draft: Option<LoadedModel>,
    /// The engine's settings: [`EngineOptions::sequences`] sequences of the options' context,
    /// with their KV cache and speculation options.
    pub settings: EngineSettings,
    /// Where the engine computes.
    pub device: Device,
    /// Seconds spent loading the model (the draft model aside).
    pub load_s: f64,
}

impl EngineSetup {
    /// Loads the model and the draft model `options` name.
    ///
    /// # Errors
    ///
    /// [`SetupError::Load`] or [`SetupError::Draft`], naming the file that could not be loaded.
    pub fn load(options: &EngineOptions) -> Result<Self, SetupError> {
        let start = Instant::now();
        let loaded = LoadedModel::open(&options.model).map_err(|source| SetupError::Load {
            path: options.model.clone(),
            source: Box::new(source),
        })?;
        let load_s = start.elapsed().as_secs_f64();
        let draft = options
            .draft_model
            .as_deref()
            .map(|path: &Path| {
                LoadedModel::open(path).map_err(|source| SetupError::Draft {
                    path: path.to_owned(),
                    source: Box::new(source),
                })
            })
            .transpose()?;
        let trained = loaded.model.config.context_length;
        let context = options.context.unwrap_or(trained.min(DEFAULT_CONTEXT));
        let settings = options.settings(EngineSettings::parallel(options.sequences, context));
        Ok(Self {
            loaded,
            draft,
            settings,
            device: Device {
                request: options.device,
                nvrtc: options.nvrtc.clone(),
            },
            load_s,
        })
    }

    /// The engine of [`EngineSetup::settings`] on [`EngineSetup::device`].
    ///
    /// # Errors
    ///
    /// As [`Engine::with_draft`].
    pub fn engine(&self) -> Result<Engine<'_>, ModelError> {
        self.engine_with(self.settings)
    }

    /// An engine of `settings` (the setup's own, changed for one use) on
    /// [`EngineSetup::device`], with the draft model.
    ///
    /// # Errors
    ///
    /// As [`Engine::with_draft`].
    pub fn engine_with(&self, settings: EngineSettings) -> Result<Engine<'_>, ModelError> {
        Engine::with_draft(
            &self.loaded,
            self.draft.as_ref(),
            settings,
            self.device.clone(),
        )
    }
}
