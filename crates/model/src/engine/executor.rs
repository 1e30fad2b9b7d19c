//! Where the forward pass runs: the device is chosen here, once, for every front end. The CPU
//! runs every sequence of a step in one batched pass. The GPU runs the decoding sequences of a
//! step (one token each) in one batched pass, each row over its own device-resident cache, and
//! the prefill chunks one after another.

use rinfer_cuda::kernels::KvElement;
use rinfer_cuda::kv_pool::SharedBlocks;
use rinfer_cuda::{CudaError, GpuModel, LoadOptions};
use rinfer_kernels::ops::KvType;

use super::device::{Device, DeviceReport, Resolved, resolve};
use super::gpu_device::{GpuCache, GpuDevice};
use super::prefix_cache::BLOCK_TOKENS;
use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::forward::{Logits, Model, SeqBatch};
use crate::kv_blocks::BlockPool;
use crate::kv_cache::KvCache;
use crate::limits::MemoryPlan;
use crate::scratch::Scratch;

/// A started executor, a KV cache for each sequence, and the device it runs on.
pub(super) type Started<'d> = (Executor<'d>, Vec<SeqCache>, DeviceReport);

/// One sequence's keys and values, on the device that computes.
pub(super) enum SeqCache {
    Cpu(KvCache),
    Cuda(Box<dyn GpuCache>),
}

impl SeqCache {
    pub(super) fn clear(&mut self) {
        match self {
            Self::Cpu(c) => c.clear(),
            Self::Cuda(c) => c.truncate(0),
        }
    }

    pub(super) fn truncate(&mut self, len: usize) {
        match self {
            Self::Cpu(c) => c.truncate(len),
            Self::Cuda(c) => c.truncate(len),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Self::Cpu(c) => c.len(),
            Self::Cuda(c) => c.len(),
        }
    }

    /// Keeps the recurrent state now as the cache's checkpoint (see
    /// [`KvCache::keep_checkpoint`]; the GPU runs no recurrent layers).
    pub(super) fn keep_checkpoint(&mut self) {
        if let Self::Cpu(c) = self {
            c.keep_checkpoint();
        }
    }

    /// The position of the cache's checkpoint, when it keeps one: a cut back there is exact.
    pub(super) fn checkpoint(&self) -> Option<usize> {
        match self {
            Self::Cpu(c) => c.checkpoint(),
            Self::Cuda(_) => None,
        }
    }

    /// Memory of its keys and values: host memory on the CPU, device memory on a GPU.
    fn bytes(&self) -> usize {
        match self {
            Self::Cpu(c) => c.bytes(),
            Self::Cuda(c) => c.bytes(),
        }
    }

    /// The pool of its KV blocks (`None` on the GPU).
    pub(super) fn pool(&self) -> Option<&BlockPool> {
        match self {
            Self::Cpu(c) => Some(c.pool()),
            Self::Cuda(_) => None,
        }
    }

    /// The type the rows are stored in.
    pub(super) fn kv_type(&self) -> KvType {
        match self {
            Self::Cpu(c) => c.kv_type(),
            Self::Cuda(c) => match c.element() {
                KvElement::F32 => KvType::F32,
                KvElement::F16 => KvType::F16,
                KvElement::Q8_0 => KvType::Q8_0,
            },
        }
    }
}

/// The compute state of the chosen device.
pub(super) enum Executor<'d> {
    Cpu {
        /// Activation buffers, sized for the largest step.
        scratch: Box<Scratch>,
    },
    Cuda {
        gpu: Box<dyn GpuDevice + 'd>,
        /// The logits rows of one step, `[rows, vocab]`.
        logits: Vec<f32>,
    },
    /// Tests only: `inner`, except that a pass holding the token `poison` panics, as a bug in
    /// a kernel would.
    #[cfg(test)]
    Faulty {
        inner: Box<Executor<'d>>,
        poison: u32,
    },
}

/// What a pass computed: the logits rows, then the embeddings of the sequences that pool.
pub(super) struct Output<'a> {
    /// `[rows, vocab]`.
    pub(super) logits: &'a mut [f32],
    /// `[pooled sequences, hidden]`, in the order of the batch.
    pub(super) pooled: &'a [f32],
}

/// How big the buffers of an engine are.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sizes {
    pub(super) context: usize,
    pub(super) max_batch: usize,
    pub(super) sequences: usize,
    pub(super) all_logits: bool,
    /// The most tokens a decoding sequence guesses ahead in a step (each needs a logits row,
    /// and on the GPU a decode row).
    pub(super) draft_max: usize,
    /// The KV cache's type; `None`: the default, f16.
    pub(super) kv_type: Option<KvType>,
}

impl Sizes {
    /// The sizes of a draft model's executor beside a model of these: as many sequences, as
    /// long a context and as large a batch, one logits row per sequence (it guesses one token
    /// a pass, and scores nothing).
    pub(super) fn for_draft(self) -> Self {
        Self {
            all_logits: false,
            draft_max: 0,
            ..self
        }
    }

    /// Checks that the KV caches and scratch buffers of a CPU model of `config` at these sizes,
    /// with `logit_rows` rows of logits, fit the memory available.
    pub(super) fn check_memory(
        &self,
        config: &ModelConfig,
        logit_rows: usize,
    ) -> Result<(), ModelError> {
        let plan = MemoryPlan::new(
            config,
            self.kv_type.unwrap_or_default(),
            self.context,
            self.sequences,
            self.max_batch,
            logit_rows,
        )?;
        plan.check_available()
    }

    /// Most rows of logits one step produces.
    fn logit_rows(&self) -> usize {
        if self.all_logits {
            self.max_batch
        } else {
            let per_sequence = self.draft_max.saturating_add(1);
            self.sequences
                .saturating_mul(per_sequence)
                .min(self.max_batch)
        }
    }
}

impl<'d> Executor<'d> {
    /// Sets up the device `device` asks for, with `sizes.sequences` KV caches; on a GPU its
    /// pool has room for `cached_blocks` blocks of the prefix cache too, or none where those
    /// do not fit its memory.
    pub(super) fn start(
        model: &Model,
        device: Device,
        sizes: Sizes,
        cached_blocks: usize,
    ) -> Result<(Self, Vec<SeqCache>, DeviceReport), ModelError> {
        // A KV type the GPU does not keep makes it unusable: `auto` then runs on the CPU.
        let resolved = resolve(device.request, || {
            let options = LoadOptions {
                ordinal: 0,
                context: sizes.context,
                max_batch: sizes.max_batch,
                all_logits: sizes.all_logits,
                sequences: sizes.sequences,
                guesses: sizes.draft_max,
                nvrtc: device.nvrtc,
                kv: gpu_kv_element(sizes.kv_type)?,
                cached_blocks,
            };
            check_gpu_runs(&model.config)?;
            let view = model.gpu_view()?;
            match GpuModel::load(&view, &options) {
                Err(CudaError::OutOfMemory { .. }) if cached_blocks > 0 => {
                    let options = LoadOptions {
                        cached_blocks: 0,
                        ..options
                    };
                    GpuModel::load(&view, &options)
                }
                loaded => loaded,
            }
        })?;
        let config = &model.config;
        Ok(match resolved {
            Resolved::Cuda(gpu) => Self::on_gpu(Box::new(gpu), config, sizes)?,
            Resolved::Cpu { reason } => {
                let logit_rows = sizes.logit_rows();
                let kv_type = sizes.kv_type.unwrap_or_default();
                sizes.check_memory(config, logit_rows)?;
                let scratch = Scratch::with_logit_rows(config, sizes.max_batch, logit_rows);
                let caches = KvCache::try_pooled(
                    config,
                    kv_type,
                    sizes.context,
                    sizes.max_batch,
                    sizes.sequences,
                )?;
                let caches = caches.into_iter().map(SeqCache::Cpu).collect();
                let executor = Self::Cpu {
                    scratch: Box::new(scratch),
                };
                (executor, caches, DeviceReport::Cpu { reason })
            }
        })
    }

    /// The executor of `gpu`, with `sizes.sequences` KV caches on it.
    pub(super) fn on_gpu(
        gpu: Box<dyn GpuDevice + 'd>,
        config: &ModelConfig,
        sizes: Sizes,
    ) -> Result<(Self, Vec<SeqCache>, DeviceReport), ModelError> {
        let report = DeviceReport::Cuda(gpu.info().clone());
        let caches = (0..sizes.sequences)
            .map(|_| gpu.new_cache().map(SeqCache::Cuda))
            .collect::<Result<_, _>>()?;
        let logits = vec![0.0; sizes.logit_rows() * config.vocab_size];
        Ok((Self::Cuda { gpu, logits }, caches, report))
    }

    /// The GPU this executor runs on (`None` on the CPU).
    fn gpu(&self) -> Option<&(dyn GpuDevice + 'd)> {
        match self {
            Self::Cuda { gpu, .. } => Some(gpu.as_ref()),
            Self::Cpu { .. } => None,
            #[cfg(test)]
            Self::Faulty { inner, .. } => inner.gpu(),
        }
    }

    /// The most rows one batched decode pass of the GPU runs (`None` on the CPU).
    pub(super) fn gpu_decode_rows(&self) -> Option<usize> {
        self.gpu().map(|gpu| gpu.decode_rows())
    }

    /// The shared reference counts of the GPU's pool of KV blocks (`None` on the CPU).
    pub(super) fn gpu_blocks(&self) -> Option<SharedBlocks> {
        self.gpu().map(|gpu| gpu.kv_blocks())
    }

    /// Runs each `(tokens, wanted, cache)` at the positions following its cache and returns
    /// the logits rows `wanted` (its last token's, or all of its tokens'), concatenated. On an
    /// error no cache has grown.
    pub(super) fn forward(
        &mut self,
        model: &Model,
        batch: Vec<(&[u32], Logits, &mut SeqCache)>,
    ) -> Result<Output<'_>, ModelError> {
        let pooling = batch
            .iter()
            .filter(|(tokens, wanted, _)| matches!(wanted, Logits::Pooled(_)) && !tokens.is_empty())
            .count();
        match self {
            Self::Cpu { scratch } => {
                let mut seqs = Vec::with_capacity(batch.len());
                for (tokens, logits, cache) in batch {
                    let SeqCache::Cpu(cache) = cache else {
                        return Err(wrong_device());
                    };
                    seqs.push(SeqBatch {
                        tokens,
                        cache,
                        logits,
                    });
                }
                let rows = model.forward_batch(&mut seqs, scratch)?.len();
                let (logits, pooled) = scratch.split_output(rows, pooling, model.config.hidden);
                Ok(Output { logits, pooled })
            }
            Self::Cuda { .. } if pooling > 0 => Err(ModelError::InvalidRequest(
                "embeddings are computed on the CPU only: start with --device cpu".into(),
            )),
            Self::Cuda { gpu, logits } => {
                let rows = forward_on_gpu(&mut **gpu, logits, model.config.vocab_size, batch)?;
                Ok(Output {
                    logits: &mut logits[..rows * model.config.vocab_size],
                    pooled: &[],
                })
            }
            #[cfg(test)]
            Self::Faulty { inner, poison } => {
                if batch.iter().any(|(tokens, _, _)| tokens.contains(poison)) {
                    panic!("a poisoned token reached the forward pass");
                }
                inner.forward(model, batch)
            }
        }
    }

    /// The logits of every position of `tokens`, `[n, vocab]`, computed into an empty `cache`.
    pub(super) fn score(
        &mut self,
        model: &Model,
        tokens: &[u32],
        cache: &mut SeqCache,
    ) -> Result<Vec<f32>, ModelError> {
        cache.clear();
        Ok(match (self, cache) {
            (Self::Cpu { scratch }, SeqCache::Cpu(cache)) => {
                model.forward(tokens, cache, scratch, Logits::All)?.to_vec()
            }
            (Self::Cuda { gpu, .. }, SeqCache::Cuda(cache)) => gpu
                .prefill(tokens, &mut **cache, rinfer_cuda::Logits::All)?
                .to_vec(),
            #[cfg(test)]
            (Self::Faulty { inner, .. }, cache) => inner.score(model, tokens, cache)?,
            _ => return Err(wrong_device()),
        })
    }

    /// Host bytes of the activation and logits buffers.
    pub(super) fn scratch_bytes(&self) -> usize {
        match self {
            Self::Cpu { scratch } => scratch.bytes(),
            Self::Cuda { logits, .. } => logits.len() * 4,
            #[cfg(test)]
            Self::Faulty { inner, .. } => inner.scratch_bytes(),
        }
    }
}

/// One sequence of a GPU step.
struct GpuSeq<'b> {
    tokens: &'b [u32],
    wanted: rinfer_cuda::Logits,
    cache: &'b mut dyn GpuCache,
    /// Its first row in the step's logits.
    row: usize,
    /// Its cache's length before the step.
    before: usize,
}

/// Runs a step on the GPU and returns the number of logits rows written to `logits`
/// (`[rows, vocab]`, in the order of the batch). On an error every cache is back at its
/// length before the step.
fn forward_on_gpu(
    gpu: &mut dyn GpuDevice,
    logits: &mut [f32],
    vocab: usize,
    batch: Vec<(&[u32], Logits, &mut SeqCache)>,
) -> Result<usize, ModelError> {
    let mut seqs = Vec::with_capacity(batch.len());
    let mut rows = 0;
    for (tokens, wanted, cache) in batch {
        let SeqCache::Cuda(cache) = cache else {
            return Err(wrong_device());
        };
        let (wanted, n) = match wanted {
            Logits::All => (rinfer_cuda::Logits::All, tokens.len()),
            Logits::Last | Logits::Pooled(_) => {
                (rinfer_cuda::Logits::Last, usize::from(!tokens.is_empty()))
            }
        };
        let before = cache.len();
        seqs.push(GpuSeq {
            tokens,
            wanted,
            cache: &mut **cache,
            row: rows,
            before,
        });
        rows += n;
    }
    if rows * vocab > logits.len() {
        return Err(CudaError::BatchTooLarge {
            requested: rows,
            max: logits.len() / vocab,
        }
        .into());
    }
    let result = run_on_gpu(gpu, logits, vocab, &mut seqs);
    if result.is_err() {
        for s in &mut seqs {
            s.cache.truncate(s.before);
        }
    }
    result?;
    Ok(rows)
}

/// The prompt chunks of `seqs` one by one, then the decoding sequences in batched passes of
/// up to the device's decode rows, each sequence whole in one pass. A decoding sequence feeds
/// one token, or its last token and the guesses it verifies, whose logits are all wanted (the
/// engine wants every row's logits of no other sequence): the decode rows give each of them
/// the logits of that token decoded alone. A prompt chunk, even of one token (the last of a
/// prompt found in the prefix cache), runs as prompt tokens, so it equals the cold prompt.
fn run_on_gpu(
    gpu: &mut dyn GpuDevice,
    logits: &mut [f32],
    vocab: usize,
    seqs: &mut [GpuSeq<'_>],
) -> Result<(), CudaError> {
    let decodes = |s: &GpuSeq<'_>| s.wanted == rinfer_cuda::Logits::All;
    for s in seqs
        .iter_mut()
        .filter(|s| !s.tokens.is_empty() && !decodes(s))
    {
        let out = gpu.prefill(s.tokens, &mut *s.cache, s.wanted)?;
        logits[s.row * vocab..][..out.len()].copy_from_slice(out);
    }
    let per_pass = gpu.decode_rows();
    let mut pass: Vec<(&[u32], &mut dyn GpuCache)> = Vec::with_capacity(seqs.len());
    let mut at = Vec::with_capacity(seqs.len());
    let mut rows = 0;
    for s in seqs
        .iter_mut()
        .filter(|s| !s.tokens.is_empty() && decodes(s))
    {
        if rows + s.tokens.len() > per_pass && !pass.is_empty() {
            decode_pass(gpu, logits, vocab, &mut pass, &at)?;
            pass.clear();
            at.clear();
            rows = 0;
        }
        rows += s.tokens.len();
        pass.push((s.tokens, &mut *s.cache));
        at.push(s.row);
    }
    if !pass.is_empty() {
        decode_pass(gpu, logits, vocab, &mut pass, &at)?;
    }
    Ok(())
}

/// One batched decode pass over `pass`; sequence `i`'s rows of logits go to rows `at[i]..` of
/// `logits`.
fn decode_pass(
    gpu: &mut dyn GpuDevice,
    logits: &mut [f32],
    vocab: usize,
    pass: &mut [(&[u32], &mut dyn GpuCache)],
    at: &[usize],
) -> Result<(), CudaError> {
    let out = gpu.forward_rows(pass)?;
    let mut rest = out;
    for ((tokens, _), &to) in pass.iter().zip(at) {
        let (mine, others) = rest.split_at(tokens.len() * vocab);
        logits[to * vocab..][..mine.len()].copy_from_slice(mine);
        rest = others;
    }
    Ok(())
}

/// Blocks of the GPU's KV pool to set aside for a prefix cache of `budget` bytes (a block
/// counting every layer's rows, its rings' copies too): none for a model with recurrent layers
/// (whose states the GPU prefix cache does not keep), at most as many as the sequences' own
/// caches take.
pub(super) fn gpu_cached_blocks(config: &ModelConfig, sizes: Sizes, budget: usize) -> usize {
    let Ok(element) = gpu_kv_element(sizes.kv_type) else {
        return 0;
    };
    let block_bytes = config.layers * 2 * BLOCK_TOKENS * element.row_bytes(config.kv_dim());
    if !gpu_prefix_cache_runs(config) || block_bytes == 0 {
        return 0;
    }
    let own = sizes.sequences * sizes.context.div_ceil(BLOCK_TOKENS);
    (budget / block_bytes).min(own)
}

/// Whether the GPU's prefix cache keeps `config`'s blocks: no layer is recurrent (a recurrent
/// state is not kept on the GPU; sliding-window rings are, as copies of their rows).
pub(super) fn gpu_prefix_cache_runs(config: &ModelConfig) -> bool {
    (0..config.layers).all(|layer| config.recurrence_of(layer).is_none())
}

/// Memory of the KV caches: host memory on the CPU, device memory on a GPU.
pub(super) fn cache_bytes(caches: &[SeqCache]) -> usize {
    caches.iter().map(SeqCache::bytes).sum()
}

fn wrong_device() -> ModelError {
    ModelError::InvalidConfig("a KV cache of another device reached this executor".into())
}

/// Refuses the models the GPU's step does not run: encoders (bidirectional attention) and
/// embedding models (pooling), which `auto` then runs on the CPU.
fn check_gpu_runs(config: &ModelConfig) -> Result<(), CudaError> {
    if !config.causal || config.pooling.is_some() {
        return Err(CudaError::Unsupported(format!(
            "it does not pool embeddings nor run encoders yet ({} model): run it on the CPU \
             with --device cpu",
            config.arch
        )));
    }
    Ok(())
}

/// The GPU cache's element type for the KV type asked for (f16 when none was): the GPU keeps
/// f32, f16 and q8_0; another type is refused.
fn gpu_kv_element(kv_type: Option<KvType>) -> Result<KvElement, CudaError> {
    match kv_type.unwrap_or_default() {
        KvType::F32 => Ok(KvElement::F32),
        KvType::F16 => Ok(KvElement::F16),
        KvType::Q8_0 => Ok(KvElement::Q8_0),
        other => Err(CudaError::Unsupported(format!(
            "it keeps its KV cache in f16, f32 or q8_0, not {other}: pass --kv-type f16 (the \
             default), f32 or q8_0 on the GPU, or run on the CPU with --device cpu"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_keeps_f16_by_default_or_f32_or_q8_0_and_says_how_to_get_another() {
        assert_eq!(gpu_kv_element(None).unwrap(), KvElement::F16);
        assert_eq!(gpu_kv_element(Some(KvType::F16)).unwrap(), KvElement::F16);
        assert_eq!(gpu_kv_element(Some(KvType::F32)).unwrap(), KvElement::F32);
        assert_eq!(gpu_kv_element(Some(KvType::Q8_0)).unwrap(), KvElement::Q8_0);
        for kv_type in [KvType::Q4_0, KvType::Q5_1] {
            let err = gpu_kv_element(Some(kv_type)).unwrap_err().to_string();
            assert!(err.contains("f16, f32 or q8_0"), "{err}");
            assert!(err.contains(kv_type.name()), "{err}");
            assert!(err.contains("--device cpu"), "{err}");
        }
    }
}
