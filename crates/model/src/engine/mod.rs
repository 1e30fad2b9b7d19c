//! The engine that generates: it owns the sequences, their KV memory and the device, and
//! advances any set of sequences by one batched forward pass per [`Engine::step`].
//!
//! Every front end drives it: `rinfer run` and `chat` through [`Engine::generate`], the server's
//! scheduler through [`Engine::add`], [`Engine::step`] and [`Engine::cancel`] (it keeps only
//! admission, queueing and I/O). Each step feeds every decoding sequence its last token and,
//! within the rows left, a chunk of the oldest unfinished prompts (small while others decode,
//! so their streams keep flowing; as large as the batch when nothing decodes).
//!
//! A new sequence reuses the longest cached prefix of its prompt: what its slot's cache still
//! holds from the slot's last sequence, or blocks of earlier sequences from the prefix cache
//! ([`EngineSettings::prefix_cache_bytes`]), shared by reference; see `reuse`, `prefix_cache`
//! and `kv_blocks`.
//!
//! A sequence's logits do not depend on what runs beside it, so its tokens are the same alone
//! or in a batch. When a pass fails, the engine retries its sequences one by one, so only the
//! sequence that caused the failure ends with [`Event::Failed`].
//!
//! ```no_run
//! use rinfer_model::{DeviceRequest, Engine, EngineSettings, LoadedModel, Request, SamplingParams};
//!
//! let loaded = LoadedModel::open("gemma-3-270m-q4_k_m.gguf")?;
//! let mut engine = Engine::new(&loaded, EngineSettings::single(2048), DeviceRequest::Cpu)?;
//! let prompt = loaded.tokenizer.encode("The capital of France is", true, false)?;
//! let request = Request::new(prompt, 32).with_sampling(SamplingParams::greedy());
//! let out = engine.generate(request, |text| print!("{text}"))?;
//! println!("\n{} tokens, {:?}", out.tokens.len(), out.finish);
//! # Ok::<(), rinfer_model::ModelError>(())
//! ```

mod constraint;
mod device;
mod draft_model;
mod embed;
mod executor;
mod generate;
mod gpu_device;
mod logprobs;
mod prefix_cache;
mod request;
mod reuse;
mod sequence;
mod setup;
mod speculate;
mod start;
mod stop;

use std::panic::AssertUnwindSafe;

use rayon::prelude::*;
pub use rinfer_kernels::ops::KvType;

use crate::error::ModelError;
use crate::forward::Logits;
use crate::kv_blocks::{BlockPool, KvPoolStats};
use crate::loaded::LoadedModel;
pub use constraint::{ConstraintMatcher, TokenConstraint};
pub use device::{Device, DeviceReport, DeviceRequest, GpuInfo, NvrtcSearch, Resolved, resolve};
use draft_model::{DraftModel, Want};
pub use embed::normalize;
use executor::{Executor, SeqCache};
pub use gpu_device::{GpuCache, GpuDevice, own_rows};
use prefix_cache::BlockStore;
pub use prefix_cache::{BLOCK_TOKENS, PrefixCacheStats};
pub use request::{Event, FinishReason, Generation, Request, SeqId, Timings, TokenLogprob};
use reuse::{Placement, Rings};
use rinfer_cuda::kv_pool::lock;
use sequence::Sequence;
pub use setup::{DEFAULT_CONTEXT, EngineOptions, EngineSetup, SetupError};
pub use speculate::{Speculation, SpeculationStats};
pub use stop::StopMatcher;

/// The sizes of an engine, fixed when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineSettings {
    /// Sequences that run at once (one KV cache each).
    pub max_sequences: usize,
    /// Positions of each sequence's KV cache.
    pub context: usize,
    /// Most token rows in one forward pass.
    pub max_batch: usize,
    /// Most prompt tokens one step takes while other sequences decode.
    pub prefill_chunk: usize,
    /// Whether [`Engine::score`] is wanted (buffers for every position's logits).
    pub score: bool,
    /// The most bytes the prefix cache's blocks hold (0: none kept beyond the slots' own
    /// caches).
    pub prefix_cache_bytes: usize,
    /// Whether decoding sequences guess tokens ahead and verify them in the same pass (the
    /// text is the same either way).
    pub speculation: Speculation,
    /// The type of the KV cache's rows; `None`: the device's default (f16 on the CPU, as in
    /// llama.cpp, half the memory of f32; f32 on the GPU, which refuses other types).
    pub kv_type: Option<KvType>,
}

impl EngineSettings {
    /// Rows of the largest forward pass.
    pub const MAX_BATCH: usize = 512;
    /// Prompt tokens per step while other sequences decode.
    pub const PREFILL_CHUNK: usize = 32;

    /// One sequence of up to `context` positions, prompts prefilled in batches of 512.
    pub fn single(context: usize) -> Self {
        Self::parallel(1, context)
    }

    /// `sequences` at once, each of up to `context` positions.
    pub fn parallel(sequences: usize, context: usize) -> Self {
        let context = context.max(1);
        let sequences = sequences.max(1);
        Self {
            max_sequences: sequences,
            context,
            max_batch: Self::MAX_BATCH.min(context).max(sequences),
            prefill_chunk: Self::PREFILL_CHUNK,
            score: false,
            prefix_cache_bytes: Self::default_prefix_cache_bytes(),
            speculation: Speculation::Off,
            kv_type: None,
        }
    }

    /// The prefix cache's default budget: a quarter of the memory available now, at most
    /// 4 GiB (1 GiB where the memory available cannot be read).
    pub fn default_prefix_cache_bytes() -> usize {
        const GIB: u64 = 1 << 30;
        let bytes = crate::limits::available_memory_bytes().map_or(GIB, |a| (a / 4).min(4 * GIB));
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }
}

/// Sequences, their KV memory and the device that runs them.
pub struct Engine<'m> {
    loaded: &'m LoadedModel,
    settings: EngineSettings,
    executor: Executor<'m>,
    device: DeviceReport,
    /// One KV cache per slot.
    caches: Vec<SeqCache>,
    /// Slots no sequence holds.
    free: Vec<usize>,
    /// The tokens each free slot's cache holds, from its last sequence.
    histories: Vec<Vec<u32>>,
    /// The tenant of each slot's last sequence (whose history it holds).
    owners: Vec<u64>,
    /// The sliding-window layers' rings, which bound how far a cache may be cut back.
    rings: Rings,
    /// Blocks of earlier sequences.
    store: BlockStore,
    /// The type of every KV cache's rows.
    kv_type: KvType,
    /// Requests and tokens the prefix cache has seen.
    reuse_counts: PrefixCacheStats,
    /// Guesses made and confirmed.
    speculation_counts: SpeculationStats,
    /// The draft model, when it guesses.
    draft: Option<DraftModel<'m>>,
    /// Running sequences, oldest first.
    running: Vec<Sequence<'m>>,
    next_id: u64,
}

impl<'m> Engine<'m> {
    /// The engine's sizes.
    pub fn settings(&self) -> EngineSettings {
        self.settings
    }

    /// The type the KV caches store their rows in (the device's default when the settings
    /// left it out).
    pub fn kv_type(&self) -> KvType {
        self.kv_type
    }

    /// The device that computes, and why it was chosen.
    pub fn device(&self) -> &DeviceReport {
        &self.device
    }

    /// Memory the KV caches of the sequences may take at most, in bytes: on the CPU their rings
    /// and the blocks of a whole context each (host memory), on a GPU their device buffers.
    pub fn kv_bytes(&self) -> usize {
        executor::cache_bytes(&self.caches)
    }

    /// Host memory of the activation and logits buffers, in bytes.
    pub fn scratch_bytes(&self) -> usize {
        self.executor.scratch_bytes()
    }

    /// Memory of the draft model's KV caches (on its device) and host buffers, in bytes (0
    /// without one).
    pub fn draft_bytes(&self) -> usize {
        self.draft.as_ref().map_or(0, DraftModel::bytes)
    }

    /// The device the draft model runs on, when there is one.
    pub fn draft_device(&self) -> Option<&DeviceReport> {
        self.draft.as_ref().map(DraftModel::device)
    }

    /// What the prefix cache holds and has done.
    pub fn prefix_stats(&self) -> PrefixCacheStats {
        PrefixCacheStats {
            evictions: self.store.evictions(),
            blocks: self.store.blocks(),
            bytes: self.store.bytes(),
            budget: self.store.budget(),
            ..self.reuse_counts
        }
    }

    /// The KV blocks of the sequences and of the prefix cache (on a GPU, of its pool, which
    /// is allocated whole when the model loads).
    pub fn kv_pool_stats(&self) -> KvPoolStats {
        if let Some(blocks) = self.executor.gpu_blocks() {
            let pool = lock(&blocks);
            let config = &self.loaded.model.config;
            let pooled = (0..config.layers)
                .filter(|&layer| config.window_of(layer).is_none())
                .count();
            let row_bytes = self.kv_type.row_bytes(config.kv_dim()).unwrap_or(0);
            return KvPoolStats {
                blocks_in_use: pool.capacity() - pool.free(),
                blocks_allocated: pool.capacity(),
                capacity: pool.capacity(),
                block_bytes: pooled * 2 * BLOCK_TOKENS * row_bytes,
            };
        }
        let pool = self.caches.first().and_then(SeqCache::pool);
        pool.map(BlockPool::stats).unwrap_or_default()
    }

    /// Tokens guessed ahead and confirmed since the engine started.
    pub fn speculation_stats(&self) -> SpeculationStats {
        self.speculation_counts
    }

    /// Forgets every cached prefix (the free slots' caches and histories, and the stored
    /// blocks), so that the next request computes its whole prompt, as a measurement of a
    /// cold prompt wants.
    pub fn clear_prefix_cache(&mut self) {
        self.histories.iter_mut().for_each(Vec::clear);
        for &slot in &self.free {
            self.caches[slot].clear();
        }
        self.store.clear();
    }

    /// Sequences that can start now.
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Whether another sequence can start now.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// Whether any sequence is running.
    pub fn is_busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// Sequences running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Positions held in the KV caches of running sequences.
    pub fn cached_positions(&self) -> usize {
        self.running.iter().map(|s| self.caches[s.slot].len()).sum()
    }

    /// Checks `request` against the model and the context.
    pub fn validate(&self, request: &Request) -> Result<(), ModelError> {
        let vocab = self.loaded.model.config.vocab_size;
        if request.prompt.is_empty() {
            return Err(ModelError::InvalidRequest("the prompt is empty".into()));
        }
        if request.max_tokens == 0 {
            return Err(ModelError::InvalidRequest(
                "max_tokens must be at least 1".into(),
            ));
        }
        if let Some(&id) = request.prompt.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::TokenOutOfRange { id, vocab });
        }
        let config = &self.loaded.model.config;
        if request.embed {
            if config.pooling.is_none() {
                return Err(ModelError::InvalidRequest(format!(
                    "this {} model is not an embedding model (its GGUF has no pooling type); \
                     load one that has, such as a BERT or a Qwen3 embedding model",
                    config.arch
                )));
            }
            // The whole prompt runs in one pass, beside one row of every other sequence.
            let one_pass = self.settings.max_batch + 1 - self.settings.max_sequences;
            if request.prompt.len() > one_pass.min(self.settings.context) {
                return Err(ModelError::InvalidRequest(format!(
                    "the input has {} tokens; an embedding takes at most {} (the batch size and \
                     the context)",
                    request.prompt.len(),
                    one_pass.min(self.settings.context)
                )));
            }
            return Ok(());
        }
        if !config.causal {
            return Err(ModelError::InvalidRequest(format!(
                "this {} model is an encoder: it makes embeddings, not text",
                config.arch
            )));
        }
        if request.prompt.len().saturating_add(request.max_tokens) > self.settings.context {
            return Err(ModelError::ContextOverflow {
                prompt: request.prompt.len(),
                requested: request.max_tokens,
                context: self.settings.context,
            });
        }
        Ok(())
    }

    /// Starts `request`; its events come out of the following steps. Its prompt's longest
    /// cached prefix is reused, not computed.
    pub fn add(&mut self, request: Request) -> Result<SeqId, ModelError> {
        self.validate(&request)?;
        // An embedding computes its whole prompt (an encoder's keys depend on all of it).
        let reusable: &[u32] = if request.embed { &[] } else { &request.prompt };
        let Some(Placement {
            slot,
            reused,
            chain,
        }) = self.place(reusable, request.tenant)
        else {
            return Err(ModelError::EngineFull(self.settings.max_sequences));
        };
        let counts = &mut self.reuse_counts;
        counts.requests += 1;
        counts.hits += u64::from(reused > 0);
        counts.prompt_tokens += request.prompt.len() as u64;
        counts.cached_tokens += reused as u64;
        let id = SeqId(self.next_id);
        self.next_id += 1;
        let vocab = self.loaded.model.config.vocab_size;
        let tokenizer = &self.loaded.tokenizer;
        let pooling = request
            .embed
            .then_some(self.loaded.model.config.pooling)
            .flatten();
        self.running.push(Sequence::new(
            id,
            slot,
            (reused, chain),
            request,
            (tokenizer, vocab),
            self.settings.speculation,
            pooling,
        ));
        Ok(id)
    }

    /// Ends sequence `id` (its client went away): reports [`FinishReason::Cancelled`] and
    /// frees its memory. Returns whether it was running.
    pub fn cancel(&mut self, id: SeqId, mut on_event: impl FnMut(Event)) -> bool {
        let Some(at) = self.running.iter().position(|s| s.id == id) else {
            return false;
        };
        let seq = self.running.remove(at);
        self.release(&seq);
        on_event(seq.finished_event(FinishReason::Cancelled));
        true
    }

    /// Runs one forward pass over every running sequence (prompt chunks within the batch)
    /// and samples a token for each whose prompt is complete; reports what happened, in
    /// order, through `on_event`. Returns the token rows the pass ran.
    pub fn step(&mut self, mut on_event: impl FnMut(Event)) -> usize {
        let plan = self.plan();
        let rows = plan.iter().map(|&(_, n)| n).sum();
        if plan.is_empty() {
            return 0;
        }
        if let Err(error) = self.run(&plan, &mut on_event) {
            if plan.len() == 1 {
                self.fail(plan[0].0, error, &mut on_event);
            } else {
                tracing::warn!(%error, "batched pass failed; retrying its sequences one by one");
                for &entry in &plan {
                    if let Err(error) = self.run(&[entry], &mut on_event) {
                        self.fail(entry.0, error, &mut on_event);
                    }
                }
            }
        }
        self.retire(&mut on_event);
        rows
    }

    /// Which sequences run this step and how many tokens each feeds: every decoding sequence
    /// its last token and the guesses that fit, prompts a chunk within the rows left. Indices
    /// into `running`, ascending.
    fn plan(&mut self) -> Vec<(usize, usize)> {
        let s = &self.settings;
        let decoding = self
            .running
            .iter()
            .filter(|seq| seq.prompt_left() == 0)
            .count();
        let chunk = if decoding > 0 {
            s.prefill_chunk
        } else {
            s.max_batch
        };
        // Rows beyond one per decoding sequence, for guesses first, then prompts.
        let mut spare = s.max_batch - decoding;
        let mut rows = Vec::with_capacity(self.running.len());
        for seq in &mut self.running {
            if seq.prompt_left() > 0 {
                rows.push(0);
                continue;
            }
            let held = self.caches[seq.slot].len();
            let mut limit = s.speculation.draft_max().min(spare);
            // A rejected guess is cut from the cache, which the rings must allow.
            if !self.rings.can_truncate(held + 1 + limit, held + 1) {
                limit = 0;
            }
            let n = seq.draft(limit);
            spare -= n - 1;
            rows.push(n);
        }
        if let Some(draft) = &mut self.draft {
            guess_with(draft, &mut self.running, &mut rows);
        }
        // An embedding's prompt runs whole, within the rows left, or waits.
        let mut room = spare;
        let mut budget = chunk.min(spare);
        let mut plan = Vec::with_capacity(self.running.len());
        for (i, (seq, n)) in self.running.iter().zip(rows).enumerate() {
            if n > 0 {
                plan.push((i, n));
            } else if seq.pooling.is_some() {
                let n = seq.prompt_left();
                if n <= room {
                    room -= n;
                    budget = budget.min(room);
                    plan.push((i, n));
                }
            } else if budget > 0 {
                let mut n = seq.prompt_left().min(budget);
                // A recurrent state is kept for the prefix cache only where a pass ends, so
                // a prompt's chunks end on block boundaries.
                let held = self.caches[seq.slot].len();
                let boundary = (held + n) / BLOCK_TOKENS * BLOCK_TOKENS;
                if self.rings.recurrent && n < seq.prompt_left() && boundary > held {
                    n = boundary - held;
                }
                budget -= n;
                room -= n;
                plan.push((i, n));
            }
        }
        plan
    }

    /// Runs `plan` in one pass, then samples (verifying guesses, and cutting the rejected ones
    /// from the caches) and reports; on an error (or a panic in the pass) nothing has changed.
    fn run(
        &mut self,
        plan: &[(usize, usize)],
        on_event: &mut impl FnMut(Event),
    ) -> Result<(), ModelError> {
        let Self {
            loaded,
            executor,
            caches,
            running,
            store,
            speculation_counts,
            ..
        } = self;
        let model = &loaded.model;
        // A recurrent state cannot be cut back: keep it from before a step with guesses, so
        // that rejected ones are undone by restoring it and feeding the kept tokens again.
        for &(i, n) in plan {
            let seq = &mut running[i];
            if let SeqCache::Cpu(cache) = &caches[seq.slot]
                && seq.prompt_left() == 0
                && n > 1
                && cache.is_recurrent()
            {
                cache.snapshot_into(&mut seq.state_before);
            }
        }
        let mut by_slot: Vec<Option<&mut SeqCache>> = caches.iter_mut().map(Some).collect();
        let batch = plan
            .iter()
            .map(|&(i, n)| {
                let seq = &running[i];
                let cache = by_slot[seq.slot]
                    .take()
                    .expect("each running sequence holds its own slot");
                let wanted = match seq.pooling {
                    Some(pooling) => Logits::Pooled(pooling),
                    // A decoding sequence's every token (its last, then any guesses); the
                    // executor tells decoding from a prompt's last token by it.
                    None if seq.prompt_left() == 0 => Logits::All,
                    None => Logits::Last,
                };
                (seq.next_tokens(n), wanted, cache)
            })
            .collect();
        let executor::Output { logits, mut pooled } =
            std::panic::catch_unwind(AssertUnwindSafe(|| executor.forward(model, batch)))
                .unwrap_or(Err(ModelError::ForwardPanicked))?;

        let (vocab, hidden) = (model.config.vocab_size, model.config.hidden);
        let mut logits = logits;
        let mut planned = plan.iter().peekable();
        let mut to_sample = Vec::with_capacity(plan.len());
        for (i, seq) in running.iter_mut().enumerate() {
            let Some(&(_, n)) = planned.next_if(|&&(j, _)| j == i) else {
                continue;
            };
            if let Some(pooling) = seq.pooling {
                let (mine, rest) = pooled.split_at(hidden);
                pooled = rest;
                on_event(seq.embedded(&mine[..pooling.width(hidden)]));
                continue;
            }
            let decoding = seq.prompt_left() == 0;
            let rows = if decoding { n } else { 1 };
            let (mine, rest) = std::mem::take(&mut logits).split_at_mut(rows * vocab);
            logits = rest;
            if !decoding && seq.advance(n) {
                // The prompt is complete: a later prompt that repeats it goes back here.
                caches[seq.slot].keep_checkpoint();
            }
            if seq.prompt_left() == 0 {
                to_sample.push((seq, mine));
            } else {
                reuse::capture(store, seq, &caches[seq.slot]);
            }
        }
        let verified: Vec<_> = to_sample
            .par_iter_mut()
            .map(|(seq, rows)| seq.verify(rows, vocab))
            .collect();
        let mut replays = Vec::new();
        for ((seq, _), verified) in to_sample.into_iter().zip(verified) {
            let cache = &mut caches[seq.slot];
            match cache {
                SeqCache::Cpu(c) if !c.can_cut_to(seq.kv_len()) => {
                    c.restore(&seq.state_before);
                    replays.push((seq.slot, seq.fed(c.len()..seq.kv_len())));
                }
                _ => cache.truncate(seq.kv_len()),
            }
            reuse::capture(store, seq, cache);
            if verified.drafted > 0 {
                speculation_counts.record(verified.drafted, verified.accepted);
            }
            for sampled in verified.sampled {
                on_event(seq.token_event(sampled));
            }
        }
        for (slot, tokens) in replays {
            let batch = vec![(&tokens[..], Logits::Last, &mut caches[slot])];
            executor.forward(model, batch)?;
        }
        Ok(())
    }

    /// Ends the sequence at `running[index]` with `error`.
    /// (It leaves `running` in place, so the indices of a plan stay valid; [`Self::retire`]
    /// takes it out.)
    fn fail(&mut self, index: usize, error: ModelError, on_event: &mut impl FnMut(Event)) {
        tracing::error!(%error, "a sequence failed in the forward pass");
        let seq = &mut self.running[index];
        seq.failed = true;
        on_event(Event::Failed { id: seq.id, error });
    }

    /// Takes finished sequences out, reporting each and freeing its slot.
    fn retire(&mut self, on_event: &mut impl FnMut(Event)) {
        let done: Vec<_> = self
            .running
            .extract_if(.., |s| s.failed || s.finish.is_some())
            .collect();
        for mut seq in done {
            self.release(&seq);
            if let Some(why) = seq.constraint_failure.take() {
                on_event(Event::Failed {
                    id: seq.id,
                    error: ModelError::Constraint(why),
                });
            } else if let (false, Some(reason)) = (seq.failed, seq.finish) {
                on_event(seq.finished_event(reason));
            }
        }
    }
}

/// Has `draft` guess for every sequence of `running` that wants guesses, in one batched pass
/// per guessed position, and sets their `rows`.
fn guess_with(draft: &mut DraftModel<'_>, running: &mut [Sequence<'_>], rows: &mut [usize]) {
    let (at, wants): (Vec<usize>, Vec<Want<'_>>) = running
        .iter()
        .enumerate()
        .filter_map(|(i, seq)| {
            let (n, history) = seq.draft_wanted()?;
            let slot = seq.slot;
            Some((i, Want { slot, history, n }))
        })
        .unzip();
    if wants.is_empty() {
        return;
    }
    let guesses = draft.guess(&wants);
    drop(wants);
    for (i, guesses) in at.into_iter().zip(guesses) {
        rows[i] = running[i].take_guesses(&guesses);
    }
}

/// `part` as a share of `whole`, 0 when `whole` is 0 (the engine's statistics' rates).
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests;
