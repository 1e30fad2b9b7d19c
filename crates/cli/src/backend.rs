//! Where a command computes: the CPU forward pass with its cache and scratch, or the model on
//! a GPU with its device-resident cache, chosen by `--device` and always reported.

use anyhow::{Context, Result};
use rinfer_cuda::{DeviceReport, GpuKvCache, GpuModel, LoadOptions, Resolved, resolve};
use rinfer_model::gpu::generate_on_gpu;
use rinfer_model::{GenerateRequest, Generation, KvCache, LoadedModel, Logits, Scratch, generate};

use crate::engine::Engine;

/// A model's runtime state on the chosen device.
pub enum Backend {
    /// The CPU kernels.
    Cpu {
        /// KV cache.
        cache: KvCache,
        /// Activation buffers.
        scratch: Box<Scratch>,
    },
    /// A GPU.
    Cuda {
        /// The model on the device.
        gpu: Box<GpuModel>,
        /// Its KV cache.
        cache: GpuKvCache,
    },
}

impl Backend {
    /// Sets up the device `--device` asks for, for `context` positions fed in batches of
    /// `batch` tokens (`all_logits`: every position's logits are wanted), and reports it on
    /// stderr.
    pub fn start(
        engine: &Engine,
        context: usize,
        batch: usize,
        all_logits: bool,
    ) -> Result<(Self, DeviceReport)> {
        let model = &engine.loaded.model;
        let options = LoadOptions {
            ordinal: 0,
            context,
            max_batch: batch,
            all_logits,
        };
        let chosen = resolve(engine.device, || {
            GpuModel::load(&model.gpu_view(), &options)
        })
        .context("cannot run on the GPU (--device cuda)")?;
        let (backend, report) = match chosen {
            Resolved::Cuda(gpu) => {
                let report = DeviceReport::Cuda(gpu.info().clone());
                let cache = gpu.new_cache()?;
                let gpu = Box::new(gpu);
                (Self::Cuda { gpu, cache }, report)
            }
            Resolved::Cpu { reason } => {
                let (cache, scratch) = engine.cpu_buffers(context, batch, all_logits);
                let backend = Self::Cpu {
                    cache,
                    scratch: Box::new(scratch),
                };
                (backend, DeviceReport::Cpu { reason })
            }
        };
        eprintln!("device: {report}");
        Ok((backend, report))
    }

    /// Generates a continuation of `request.prompt` from an empty cache.
    pub fn generate(
        &mut self,
        loaded: &LoadedModel,
        request: &GenerateRequest,
        on_text: impl FnMut(&str),
    ) -> Result<Generation> {
        Ok(match self {
            Self::Cpu { cache, scratch } => generate(
                &loaded.model,
                &loaded.tokenizer,
                request,
                cache,
                scratch,
                on_text,
            )?,
            Self::Cuda { gpu, cache } => {
                generate_on_gpu(gpu, &loaded.tokenizer, request, cache, on_text)?
            }
        })
    }

    /// The logits of every position of `tokens`, `[n, vocab]`, from an empty cache.
    pub fn logits(&mut self, loaded: &LoadedModel, tokens: &[u32]) -> Result<Vec<f32>> {
        Ok(match self {
            Self::Cpu { cache, scratch } => {
                cache.clear();
                loaded
                    .model
                    .forward(tokens, cache, scratch, Logits::All)?
                    .to_vec()
            }
            Self::Cuda { gpu, cache } => {
                cache.clear();
                gpu.forward(tokens, cache, rinfer_cuda::Logits::All)?
                    .to_vec()
            }
        })
    }
}
