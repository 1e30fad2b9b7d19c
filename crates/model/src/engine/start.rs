//! How an engine starts: its settings checked against the model (and the draft model), the
//! device set up (or a GPU given), the draft model started on the same device, and the parts
//! assembled.

use super::device::{Device, DeviceReport, DeviceRequest};
use super::draft_model::{self, DraftModel};
use super::executor::{self, Executor, SeqCache, Sizes, Started};
use super::gpu_device::GpuDevice;
use super::prefix_cache::{BLOCK_TOKENS, BlockStore, PrefixCacheStats, StorePool};
use super::reuse::Rings;
use super::speculate::{Speculation, SpeculationStats};
use super::{Engine, EngineSettings, KvType};
use crate::error::ModelError;
use crate::kv_cache::KvCache;
use crate::loaded::LoadedModel;
use rinfer_cuda::kv_pool::lock;

impl<'m> Engine<'m> {
    /// An engine for `loaded` on the device `device` asks for (`Auto` falls back to the CPU,
    /// and [`Engine::device`] says why). Refuses a context longer than the model's positions
    /// and, on the CPU, buffers larger than the memory available.
    pub fn new(
        loaded: &'m LoadedModel,
        settings: EngineSettings,
        device: impl Into<Device>,
    ) -> Result<Self, ModelError> {
        Self::with_draft(loaded, None, settings, device)
    }

    /// An engine as [`Engine::new`] makes, with the draft model `draft` that
    /// [`Speculation::DraftModel`] needs (and no other setting takes). Refuses a draft model
    /// whose vocabulary is not `loaded`'s (another size or another token at some id).
    pub fn with_draft(
        loaded: &'m LoadedModel,
        draft: Option<&'m LoadedModel>,
        settings: EngineSettings,
        device: impl Into<Device>,
    ) -> Result<Self, ModelError> {
        let sizes = Self::check(loaded, draft, settings)?;
        let config = &loaded.model.config;
        let cached_blocks = executor::gpu_cached_blocks(config, sizes, settings.prefix_cache_bytes);
        let device = device.into();
        let started = Executor::start(&loaded.model, device.clone(), sizes, cached_blocks)?;
        // The draft model runs where the model runs: on its GPU where that takes it.
        let request = match started.2 {
            DeviceReport::Cuda(_) => DeviceRequest::Auto,
            DeviceReport::Cpu { .. } => DeviceRequest::Cpu,
        };
        let draft = draft
            .map(|draft| {
                let device = Device { request, ..device };
                let started = Executor::start(&draft.model, device, sizes.for_draft(), 0)?;
                Ok::<_, ModelError>((draft, started))
            })
            .transpose()?;
        Self::assemble(loaded, draft, settings, sizes, started)
    }

    /// An engine as [`Engine::new`] makes, its steps run by `gpu` (the CUDA runtime's
    /// `GpuModel`, or another implementation of the device seam, such as the host emulation
    /// of the CUDA kernels). Blocks of its KV pool beyond a whole context per sequence are the
    /// prefix cache's room (see [`GpuDevice::kv_blocks`]). `draft` is the draft model of
    /// [`Engine::with_draft`] with the device that runs it.
    pub fn with_gpu(
        loaded: &'m LoadedModel,
        draft: Option<(&'m LoadedModel, Box<dyn GpuDevice + 'm>)>,
        settings: EngineSettings,
        gpu: Box<dyn GpuDevice + 'm>,
    ) -> Result<Self, ModelError> {
        let sizes = Self::check(loaded, draft.as_ref().map(|(draft, _)| *draft), settings)?;
        let started = Executor::on_gpu(gpu, &loaded.model.config, sizes)?;
        let draft = draft
            .map(|(draft, gpu)| {
                let started = Executor::on_gpu(gpu, &draft.model.config, sizes.for_draft())?;
                Ok::<_, ModelError>((draft, started))
            })
            .transpose()?;
        Self::assemble(loaded, draft, settings, sizes, started)
    }

    /// Checks `settings` (and `draft`) against `loaded`; returns the executor's sizes.
    fn check(
        loaded: &LoadedModel,
        draft: Option<&LoadedModel>,
        settings: EngineSettings,
    ) -> Result<Sizes, ModelError> {
        let wants_draft = matches!(settings.speculation, Speculation::DraftModel { .. });
        if wants_draft != draft.is_some() {
            return Err(ModelError::DraftModel(
                if wants_draft {
                    "speculating with a draft model needs one (--draft-model PATH)"
                } else {
                    "a draft model is used only when speculating with it (--speculate draft)"
                }
                .into(),
            ));
        }
        if settings.max_batch < settings.max_sequences || settings.prefill_chunk == 0 {
            return Err(ModelError::InvalidConfig(format!(
                "engine batch of {} rows cannot step {} sequences with prompt chunks of {}",
                settings.max_batch, settings.max_sequences, settings.prefill_chunk
            )));
        }
        loaded.model.check_context(settings.context)?;
        if let Some(draft) = draft {
            draft_model::check_vocabulary(loaded, draft)?;
        }
        Ok(Sizes {
            context: settings.context,
            max_batch: settings.max_batch,
            sequences: settings.max_sequences,
            all_logits: settings.score,
            draft_max: settings.speculation.draft_max(),
            kv_type: settings.kv_type,
        })
    }

    /// The engine around a started executor and its caches (and the draft model's).
    fn assemble(
        loaded: &'m LoadedModel,
        draft: Option<(&'m LoadedModel, Started<'m>)>,
        settings: EngineSettings,
        sizes: Sizes,
        (executor, caches, device): Started<'m>,
    ) -> Result<Self, ModelError> {
        let mut settings = settings;
        let draft_max = settings.speculation.draft_max();
        if let Some(rows) = executor.gpu_decode_rows()
            && draft_max > 0
            && rows <= draft_max
        {
            // A sequence's last token and its guesses run in one decode pass, whose rows give
            // the logits of single-token decoding (see `speculate`).
            tracing::info!(
                rows,
                draft_max,
                "the GPU's decode pass has too few rows for a sequence's guesses; decoding plainly"
            );
            settings.speculation = Speculation::Off;
        }
        let draft = draft
            .filter(|_| settings.speculation != Speculation::Off)
            .map(|(draft, started)| DraftModel::start(draft, sizes, started))
            .transpose()?;
        let config = &loaded.model.config;
        let kv_type = caches.first().map_or(KvType::F32, SeqCache::kv_type);
        let row_bytes =
            kv_type
                .row_bytes(config.kv_dim())
                .ok_or_else(|| ModelError::SizeOverflow {
                    what: "a KV cache row".to_string(),
                })?;
        let pool = match executor.gpu_blocks() {
            Some(blocks) => {
                let own = caches.len() * settings.context.div_ceil(BLOCK_TOKENS);
                let spare = lock(&blocks).capacity().saturating_sub(own);
                let room = if executor::gpu_prefix_cache_runs(config) {
                    spare
                } else {
                    0
                };
                StorePool::Gpu { blocks, room }
            }
            None => caches
                .first()
                .and_then(SeqCache::pool)
                .cloned()
                .map_or(StorePool::None, StorePool::Cpu),
        };
        Ok(Self {
            loaded,
            settings,
            executor,
            device,
            free: (0..caches.len()).rev().collect(),
            histories: vec![Vec::new(); caches.len()],
            owners: vec![0; caches.len()],
            rings: Rings::new(config, settings.context, settings.max_batch),
            store: BlockStore::new(settings.prefix_cache_bytes, config.layers, row_bytes, pool)
                .with_state_bytes(KvCache::state_bytes(config)),
            kv_type,
            reuse_counts: PrefixCacheStats::default(),
            speculation_counts: SpeculationStats::default(),
            draft,
            caches,
            running: Vec::with_capacity(settings.max_sequences),
            next_id: 0,
        })
    }
}
