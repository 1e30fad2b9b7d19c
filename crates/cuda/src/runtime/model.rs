//! [`GpuModel`]: a model resident on one GPU, and its forward pass.

use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaGraph, CudaStream};

use crate::Logits;
use crate::device::GpuInfo;
use crate::error::CudaError;
use crate::graph_policy::{DecodeGraph, StepPlan};
use crate::host::HostModel;
use crate::kv_pool::{BlockCopy, SharedBlocks};
use crate::plan::{LoadOptions, UploadPlan};
use crate::program::{Launch, StepBuilder, WeightAddresses, WorkAddresses, copy_block};
use crate::runtime::buffers::{GpuKvCache, KvPool, Workspace, lock};
use crate::runtime::driver::{driver, driver_cuda_major, open};
use crate::runtime::kernels::Kernels;
use crate::runtime::launcher::launch;
use crate::runtime::nvrtc::Nvrtc;
use crate::runtime::row_state::RowDecode;
use crate::runtime::weights::{DeviceWeights, upload};

/// A model whose weights, KV caches and buffers live on one GPU.
pub struct GpuModel {
    pub(crate) plan: UploadPlan,
    pub(crate) info: GpuInfo,
    pub(crate) kernels: Kernels,
    pub(crate) weights: DeviceWeights,
    pub(crate) work: Workspace,
    pub(crate) work_addresses: WorkAddresses,
    /// The blocks of every sequence's full-attention layers.
    pub(crate) kv_pool: KvPool,
    /// The copies on write of the step being prepared (reused).
    pub(crate) copies: Vec<BlockCopy>,
    pub(crate) graph: DecodeGraph<CudaGraph>,
    /// The batched decode's tables and graphs.
    pub(crate) rows: RowDecode,
    pub(crate) host_logits: Vec<f32>,
    /// The launches of the step being run (reused, so steps do not allocate).
    pub(crate) launches: Vec<Launch>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) ctx: Arc<CudaContext>,
}

impl GpuModel {
    /// Uploads `model` to a GPU as `options` say: checks it against the kernels and the free
    /// memory, compiles the kernels for the device, uploads every weight and allocates the
    /// buffers.
    pub fn load(model: &HostModel<'_>, options: &LoadOptions) -> Result<Self, CudaError> {
        let plan = UploadPlan::new(model, options)?;
        let (ctx, mut info) = open(options.ordinal)?;
        let (free, _total) = ctx.mem_get_info().map_err(driver("memory query"))?;
        plan.check_fits(free as u64)?;
        let stream = ctx.new_stream().map_err(driver("stream creation"))?;
        let nvrtc = Nvrtc::find(&options.nvrtc, driver_cuda_major())?;
        let types = plan.matrices.iter().map(|m| m.ty);
        let cache = options.nvrtc.cubin_cache.as_deref();
        let kernels = Kernels::load(&ctx, &nvrtc, info.compute_capability, types, cache)?;
        info.nvrtc = Some(format!("{nvrtc}; {}", kernels.report()));
        let weights = upload(model, &stream)?;
        let work = Workspace::new(&stream, &plan.buffers)?;
        let work_addresses = work.addresses();
        let kv_pool = KvPool::new(&stream, &plan)?;
        let rows = RowDecode::new(&plan, work.cache_tables.ptr);
        stream.synchronize().map_err(driver("upload"))?;
        Ok(Self {
            host_logits: vec![0.0; plan.buffers.logits],
            plan,
            info,
            kernels,
            weights,
            work,
            work_addresses,
            kv_pool,
            copies: Vec::new(),
            graph: DecodeGraph::default(),
            rows,
            launches: Vec::new(),
            stream,
            ctx,
        })
    }

    /// The device the model is on.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The transformer the model runs, with its weights' device addresses.
    pub fn config(&self) -> &WeightAddresses {
        &self.weights.addresses
    }

    /// What was uploaded and allocated.
    pub fn plan(&self) -> &UploadPlan {
        &self.plan
    }

    /// Why decode steps run without a CUDA graph, if they do.
    pub fn graph_disabled_reason(&self) -> Option<&str> {
        self.graph.disabled_reason()
    }

    /// The reference counts of the KV pool's blocks, shared with its caches.
    pub fn kv_blocks(&self) -> SharedBlocks {
        Arc::clone(&self.kv_pool.blocks)
    }

    /// A KV cache for one sequence, sized by the load's context and batch; it takes blocks of
    /// the model's pool as it grows.
    pub fn new_cache(&self) -> Result<GpuKvCache, CudaError> {
        let cache = GpuKvCache::new(&self.stream, &self.plan, &self.kv_pool)?;
        self.stream
            .synchronize()
            .map_err(driver("cache allocation"))?;
        Ok(cache)
    }

    /// Runs `tokens`, any number of them, as prompt tokens at the positions following those in
    /// `cache`, appends their keys and values, and returns the logits asked for (`[vocab]` or
    /// `[n, vocab]`). A token's keys, values and logits are, bit for bit, the same however a
    /// prompt is divided between calls and between the plan's chunks, so a prompt that
    /// continues a cached prefix gives what the whole prompt gives cold.
    pub fn prefill(
        &mut self,
        tokens: &[u32],
        cache: &mut GpuKvCache,
        wanted: Logits,
    ) -> Result<&[f32], CudaError> {
        let rows = self.run(tokens, cache, wanted, true)?;
        self.logits_to_host(rows)
    }

    /// Copies the first `rows` rows of the step's logits to the host, once the stream has
    /// finished, and returns them.
    pub(crate) fn logits_to_host(&mut self, rows: usize) -> Result<&[f32], CudaError> {
        let len = rows * self.config().vocab_size;
        let logits = self.work.logits.slice.slice(..len);
        self.stream
            .memcpy_dtoh(&logits, &mut self.host_logits[..len])
            .map_err(driver("logits copy"))?;
        self.stream.synchronize().map_err(driver("forward"))?;
        Ok(&self.host_logits[..len])
    }

    /// Runs `tokens` (one token: the decode step, replayed as a CUDA graph; several: as
    /// [`prefill`](Self::prefill) does) and returns only the argmax of the last position's
    /// logits, computed on the device (greedy decoding without copying logits).
    pub fn forward_argmax(
        &mut self,
        tokens: &[u32],
        cache: &mut GpuKvCache,
    ) -> Result<u32, CudaError> {
        self.run(tokens, cache, Logits::Last, tokens.len() > 1)?;
        if tokens.len() > 1 {
            // A single-token step (graph or not) ends with the argmax; a batch does not.
            let argmax = self.builder().argmax();
            self.execute(std::slice::from_ref(&argmax))?;
        }
        let mut out = [0i32];
        self.stream
            .memcpy_dtoh(&self.work.argmax.slice, &mut out)
            .map_err(driver("argmax copy"))?;
        self.stream.synchronize().map_err(driver("forward"))?;
        Ok(out[0].max(0) as u32)
    }

    /// Validates, then runs every chunk of `tokens` (prompt tokens by the prefill recipe, or
    /// one decoded token); returns the logit rows left in the logits buffer.
    fn run(
        &mut self,
        tokens: &[u32],
        cache: &mut GpuKvCache,
        wanted: Logits,
        prompt: bool,
    ) -> Result<usize, CudaError> {
        self.check_feed(tokens, cache)?;
        let vocab_size = self.config().vocab_size;
        let max_batch = self.plan.options.max_batch;
        let logit_rows = self.plan.buffers.logits / vocab_size;
        if wanted == Logits::All && tokens.len() > logit_rows {
            return Err(CudaError::BatchTooLarge {
                requested: tokens.len(),
                max: logit_rows,
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("context binding"))?;
        self.reserve(cache, tokens.len())?;
        let mut rows = 0;
        for chunk in tokens.chunks(max_batch) {
            let n = chunk.len();
            rows = match wanted {
                Logits::All => n,
                Logits::Last => 1,
            };
            let result = if prompt {
                self.upload_ids(chunk, cache.len)
                    .and_then(|()| self.launch_prefill(n, cache, n - rows, rows))
            } else {
                self.decode_step(chunk[0], cache)
            };
            if let Err(error) = result {
                self.graph.invalidate(cache.id);
                return Err(error);
            }
            cache.len += n;
        }
        Ok(rows)
    }

    /// An error if `cache` was not made for this model (its blocks are another pool's).
    pub(crate) fn check_cache(&self, cache: &GpuKvCache) -> Result<(), CudaError> {
        if !Arc::ptr_eq(&cache.pool, &self.kv_pool.blocks) {
            return Err(CudaError::ForeignCache);
        }
        Ok(())
    }

    /// An error if a token of `tokens` is not in the vocabulary, if `cache` was not made for
    /// this model, or if `tokens` run past its context.
    pub(crate) fn check_feed(&self, tokens: &[u32], cache: &GpuKvCache) -> Result<(), CudaError> {
        let vocab = self.config().vocab_size;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(CudaError::TokenOutOfRange { id, vocab });
        }
        self.check_cache(cache)?;
        if cache.len + tokens.len() > cache.context {
            return Err(CudaError::ContextOverflow {
                cached: cache.len,
                requested: tokens.len(),
                context: cache.context,
            });
        }
        Ok(())
    }

    /// Readies `cache` for `n` more positions: copies each shared block they fall in (copy
    /// on write, see [`crate::kv_pool`]), takes blocks past its table, and writes its table to
    /// the device if it changed. Stream-ordered before the step that writes.
    pub(crate) fn reserve(&mut self, cache: &mut GpuKvCache, n: usize) -> Result<(), CudaError> {
        let mut copies = std::mem::take(&mut self.copies);
        copies.clear();
        let (from, to) = (cache.len, cache.len + n);
        let reserved = lock(&self.kv_pool.blocks).prepare(&mut cache.blocks, from, to, &mut copies);
        let words = (self.kv_pool.block_bytes / 4) as i64;
        let launches: Vec<Launch> = copies
            .iter()
            .map(|&copy| copy_block(self.kv_pool.keys.ptr, self.kv_pool.values.ptr, words, copy))
            .collect();
        let copied = self.execute(&launches);
        if !copies.is_empty() {
            cache.uploaded = 0;
        }
        self.copies = copies;
        copied?;
        if cache.uploaded != cache.blocks.len() {
            let mut dst = cache.table.slice.slice_mut(..cache.blocks.len());
            self.stream
                .memcpy_htod(&cache.blocks, &mut dst)
                .map_err(driver("block table upload"))?;
            cache.uploaded = cache.blocks.len();
        }
        reserved
    }

    /// Writes the batch's token ids and positions to their device buffers.
    fn upload_ids(&mut self, tokens: &[u32], pos0: usize) -> Result<(), CudaError> {
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let positions: Vec<i32> = (pos0..pos0 + tokens.len()).map(|p| p as i32).collect();
        self.write_ids(&ids, &positions)
    }

    fn write_ids(&mut self, ids: &[i32], positions: &[i32]) -> Result<(), CudaError> {
        let n = ids.len();
        let mut dst = self.work.tokens.slice.slice_mut(..n);
        self.stream
            .memcpy_htod(ids, &mut dst)
            .map_err(driver("token upload"))?;
        let mut dst = self.work.positions.slice.slice_mut(..n);
        self.stream
            .memcpy_htod(positions, &mut dst)
            .map_err(driver("token upload"))
    }

    /// One token: replays the decode graph, capturing it first if needed, or launches the
    /// kernels when graphs are off.
    fn decode_step(&mut self, token: u32, cache: &GpuKvCache) -> Result<(), CudaError> {
        self.write_ids(&[token as i32], &[cache.len as i32])?;
        match self.graph.plan(cache.id) {
            StepPlan::Launch => self.launch_decode(cache),
            StepPlan::Replay => self.replay(cache.id),
            StepPlan::Capture => {
                match self.capture(cache) {
                    Ok(graph) => self.graph.captured(graph, cache.id),
                    Err(error) => {
                        self.graph.capture_failed(cache.id, error.to_string());
                        return self.launch_decode(cache);
                    }
                }
                self.replay(cache.id)
            }
        }
    }

    pub(crate) fn builder(&self) -> StepBuilder<'_> {
        StepBuilder {
            model: &self.weights.addresses,
            work: &self.work_addresses,
            splits: self.plan.splits,
            kv: self.plan.options.kv,
        }
    }

    /// Builds and launches one prefill step (see [`StepBuilder::prefill`]).
    fn launch_prefill(
        &mut self,
        n: usize,
        cache: &GpuKvCache,
        first: usize,
        rows: usize,
    ) -> Result<(), CudaError> {
        let addresses = cache.addresses();
        self.launch_built(|model, launches| {
            model
                .builder()
                .prefill(n, &addresses, first, rows, launches)
        })
    }

    /// Builds and launches the decode step of one token (see [`StepBuilder::decode_token`]).
    fn launch_decode(&mut self, cache: &GpuKvCache) -> Result<(), CudaError> {
        let addresses = cache.addresses();
        self.launch_built(|model, launches| model.builder().decode_token(&addresses, launches))
    }

    /// Launches what `build` appends, in a buffer kept between steps.
    pub(crate) fn launch_built(
        &mut self,
        build: impl FnOnce(&Self, &mut Vec<Launch>),
    ) -> Result<(), CudaError> {
        let mut launches = std::mem::take(&mut self.launches);
        launches.clear();
        build(self, &mut launches);
        let result = self.execute(&launches);
        self.launches = launches;
        result
    }

    pub(crate) fn execute(&self, launches: &[Launch]) -> Result<(), CudaError> {
        for l in launches {
            launch(
                &self.stream,
                self.kernels.resolve(l.kernel)?,
                l.shape,
                l.args(),
            )?;
        }
        Ok(())
    }

    fn replay(&mut self, cache: u64) -> Result<(), CudaError> {
        let graph = self.graph.graph(cache).ok_or_else(|| CudaError::Driver {
            op: "graph replay",
            message: "no graph was captured".into(),
        })?;
        graph.launch().map_err(driver("graph replay"))
    }

    /// Records the decode step (kernels only: the token and position are read from device
    /// buffers written before each replay) into a graph.
    fn capture(&mut self, cache: &GpuKvCache) -> Result<CudaGraph, CudaError> {
        self.record_graph(|model| model.launch_decode(cache))
    }

    /// Records the launches `record` makes on the stream into a graph.
    pub(crate) fn record_graph(
        &mut self,
        record: impl FnOnce(&mut Self) -> Result<(), CudaError>,
    ) -> Result<CudaGraph, CudaError> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(driver("graph capture"))?;
        let recorded = record(self);
        // Capture always ends, even after a failed launch, so the stream is usable again.
        let ended = self.stream.end_capture(CUgraphInstantiate_flags(0));
        recorded?;
        ended
            .map_err(driver("graph capture"))?
            .ok_or_else(|| CudaError::Driver {
                op: "graph capture",
                message: "the capture recorded nothing".into(),
            })
    }
}
