//! The engine that generates: it owns the sequences, their KV memory and the device, and
//! advances any set of sequences by one batched forward pass per [`Engine::step`].
//!
//! Every front end drives it: `rinfer run` and `chat` through [`Engine::generate`], the server's
//! scheduler through [`Engine::add`], [`Engine::step`] and [`Engine::cancel`] (it keeps only
//! admission, queueing and I/O). Each step feeds every decoding sequence its last token and,
//! within the rows left, a chunk of the oldest unfinished prompts (small while others decode,
//! so their streams keep flowing; as large as the batch when nothing decodes).
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
mod executor;
mod logprobs;
mod request;
mod sequence;
mod stop;

use std::panic::AssertUnwindSafe;

use rayon::prelude::*;
pub use rinfer_cuda::{DeviceReport, DeviceRequest};

use crate::error::ModelError;
use crate::loaded::LoadedModel;
pub use constraint::{ConstraintMatcher, TokenConstraint};
use executor::{Executor, SeqCache, Sizes};
pub use request::{Event, FinishReason, Generation, Request, SeqId, Timings, TokenLogprob};
use sequence::Sequence;
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
        }
    }
}

/// Sequences, their KV memory and the device that runs them.
pub struct Engine<'m> {
    loaded: &'m LoadedModel,
    settings: EngineSettings,
    executor: Executor,
    device: DeviceReport,
    /// One KV cache per slot.
    caches: Vec<SeqCache>,
    /// Slots no sequence holds.
    free: Vec<usize>,
    /// Running sequences, oldest first.
    running: Vec<Sequence<'m>>,
    next_id: u64,
}

impl<'m> Engine<'m> {
    /// An engine for `loaded` on the device `device` asks for (`Auto` falls back to the CPU,
    /// and [`Engine::device`] says why). Refuses a context longer than the model's positions
    /// and, on the CPU, buffers larger than the memory available.
    pub fn new(
        loaded: &'m LoadedModel,
        settings: EngineSettings,
        device: DeviceRequest,
    ) -> Result<Self, ModelError> {
        if settings.max_batch < settings.max_sequences || settings.prefill_chunk == 0 {
            return Err(ModelError::InvalidConfig(format!(
                "engine batch of {} rows cannot step {} sequences with prompt chunks of {}",
                settings.max_batch, settings.max_sequences, settings.prefill_chunk
            )));
        }
        loaded.model.check_context(settings.context)?;
        let sizes = Sizes {
            context: settings.context,
            max_batch: settings.max_batch,
            sequences: settings.max_sequences,
            all_logits: settings.score,
        };
        let (executor, caches, device) = Executor::start(&loaded.model, device, sizes)?;
        Ok(Self {
            loaded,
            settings,
            executor,
            device,
            free: (0..caches.len()).rev().collect(),
            caches,
            running: Vec::with_capacity(settings.max_sequences),
            next_id: 0,
        })
    }

    /// The engine's sizes.
    pub fn settings(&self) -> EngineSettings {
        self.settings
    }

    /// The device that computes, and why it was chosen.
    pub fn device(&self) -> &DeviceReport {
        &self.device
    }

    /// Host memory of the KV caches, in bytes (0 for caches on a GPU).
    pub fn kv_bytes(&self) -> usize {
        executor::cache_bytes(&self.caches)
    }

    /// Host memory of the activation and logits buffers, in bytes.
    pub fn scratch_bytes(&self) -> usize {
        self.executor.scratch_bytes()
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
        if request.prompt.len().saturating_add(request.max_tokens) > self.settings.context {
            return Err(ModelError::ContextOverflow {
                prompt: request.prompt.len(),
                requested: request.max_tokens,
                context: self.settings.context,
            });
        }
        Ok(())
    }

    /// Starts `request`; its events come out of the following steps.
    pub fn add(&mut self, request: Request) -> Result<SeqId, ModelError> {
        self.validate(&request)?;
        let Some(slot) = self.free.pop() else {
            return Err(ModelError::EngineFull(self.settings.max_sequences));
        };
        self.caches[slot].clear();
        let id = SeqId(self.next_id);
        self.next_id += 1;
        let vocab = self.loaded.model.config.vocab_size;
        let tokenizer = &self.loaded.tokenizer;
        self.running
            .push(Sequence::new(id, slot, request, tokenizer, vocab));
        Ok(id)
    }

    /// Ends sequence `id` (its client went away): reports [`FinishReason::Cancelled`] and
    /// frees its memory. Returns whether it was running.
    pub fn cancel(&mut self, id: SeqId, mut on_event: impl FnMut(Event)) -> bool {
        let Some(at) = self.running.iter().position(|s| s.id == id) else {
            return false;
        };
        let seq = self.running.remove(at);
        self.free.push(seq.slot);
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
    /// one, prompts a chunk within the rows left. Indices into `running`, ascending.
    fn plan(&self) -> Vec<(usize, usize)> {
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
        let mut budget = chunk.min(s.max_batch - decoding);
        let mut plan = Vec::with_capacity(self.running.len());
        for (i, seq) in self.running.iter().enumerate() {
            if seq.prompt_left() == 0 {
                plan.push((i, 1));
            } else if budget > 0 {
                let n = seq.prompt_left().min(budget);
                budget -= n;
                plan.push((i, n));
            }
        }
        plan
    }

    /// Runs `plan` in one pass, then samples and reports; on an error (or a panic in the
    /// pass) nothing has changed.
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
            ..
        } = self;
        let model = &loaded.model;
        let mut by_slot: Vec<Option<&mut SeqCache>> = caches.iter_mut().map(Some).collect();
        let batch = plan
            .iter()
            .map(|&(i, n)| {
                let seq = &running[i];
                let cache = by_slot[seq.slot]
                    .take()
                    .expect("each running sequence holds its own slot");
                (seq.next_tokens(n), cache)
            })
            .collect();
        let logits = std::panic::catch_unwind(AssertUnwindSafe(|| executor.forward(model, batch)))
            .unwrap_or(Err(ModelError::ForwardPanicked))?;

        let vocab = model.config.vocab_size;
        let mut rows = logits.chunks_exact_mut(vocab);
        let mut planned = plan.iter().peekable();
        let mut to_sample = Vec::with_capacity(plan.len());
        for (i, seq) in running.iter_mut().enumerate() {
            let Some(&(_, n)) = planned.next_if(|&&(j, _)| j == i) else {
                continue;
            };
            let row = rows.next().expect("one logits row per planned sequence");
            if seq.advance(n) {
                to_sample.push((seq, row));
            }
        }
        let sampled: Vec<_> = to_sample
            .par_iter_mut()
            .map(|(seq, row)| seq.sample(row))
            .collect();
        for ((seq, _), sampled) in to_sample.into_iter().zip(sampled) {
            on_event(seq.token_event(sampled));
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
        for seq in self
            .running
            .extract_if(.., |s| s.failed || s.finish.is_some())
        {
            self.free.push(seq.slot);
            if let (false, Some(reason)) = (seq.failed, seq.finish) {
                on_event(seq.finished_event(reason));
            }
        }
    }

    /// Runs `request` to its end, calling `on_text` with each piece of text as soon as it is
    /// safe to show; the other running sequences advance too (their events are dropped).
    pub fn generate(
        &mut self,
        request: Request,
        mut on_text: impl FnMut(&str),
    ) -> Result<Generation, ModelError> {
        let id = self.add(request)?;
        let mut text = String::new();
        let mut result = None;
        while result.is_none() {
            self.step(|event| match event {
                Event::Token { id: e, text: t, .. } if e == id => {
                    on_text(&t);
                    text.push_str(&t);
                }
                Event::Finished {
                    id: e,
                    reason,
                    tokens,
                    timings,
                } if e == id => {
                    result = Some(Ok((reason, tokens, timings)));
                }
                Event::Failed { id: e, error } if e == id => {
                    result = Some(Err(error));
                }
                _ => {}
            });
        }
        let (finish, tokens, timings) = result.expect("the loop ends with a result")?;
        Ok(Generation {
            tokens,
            text,
            finish,
            timings,
        })
    }

    /// The logits of every position of `tokens`, `[n, vocab]`, from an empty cache (needs
    /// [`EngineSettings::score`] and a free slot).
    pub fn score(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let Some(&slot) = self.free.last() else {
            return Err(ModelError::EngineFull(self.settings.max_sequences));
        };
        let cache = &mut self.caches[slot];
        let result = self.executor.score(&self.loaded.model, tokens, cache);
        cache.clear();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::SamplingParams;

    fn fixture() -> LoadedModel {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/models/gemma3-tiny-q4_k_m.gguf"
        );
        LoadedModel::open(path).unwrap()
    }

    /// Every sequence's events until all have ended: tokens of the finished, ids of the failed.
    fn drain(engine: &mut Engine<'_>) -> (Vec<(SeqId, Vec<u32>)>, Vec<SeqId>) {
        let (mut finished, mut failed) = (Vec::new(), Vec::new());
        while engine.is_busy() {
            engine.step(|event| match event {
                Event::Finished { id, tokens, .. } => finished.push((id, tokens)),
                Event::Failed { id, .. } => failed.push(id),
                Event::Token { .. } => {}
            });
        }
        finished.sort_by_key(|(id, _)| *id);
        (finished, failed)
    }

    #[test]
    fn a_pass_that_fails_ends_only_the_sequence_that_caused_it() {
        let loaded = fixture();
        let settings = EngineSettings::parallel(3, 64);
        let seeded = |seed| SamplingParams {
            seed,
            ..SamplingParams::default()
        };
        let poison = 7;
        let requests = [
            Request::new(vec![2, 10, 11, 12], 8).with_sampling(seeded(1)),
            Request::new(vec![2, 20, poison, 21], 8).with_sampling(seeded(2)),
            Request::new(vec![2, 30], 8).with_sampling(seeded(3)),
        ];

        let mut healthy = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
        for r in [&requests[0], &requests[2]] {
            healthy.add(r.clone()).unwrap();
        }
        let (expected, _) = drain(&mut healthy);

        let mut faulty = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
        let inner = std::mem::replace(
            &mut faulty.executor,
            Executor::Cpu {
                scratch: Box::new(crate::scratch::Scratch::new(&loaded.model.config, 1)),
            },
        );
        faulty.executor = Executor::Faulty {
            inner: Box::new(inner),
            poison,
        };
        let ids: Vec<SeqId> = requests
            .iter()
            .map(|r| faulty.add(r.clone()).unwrap())
            .collect();
        let (finished, failed) = drain(&mut faulty);
        assert_eq!(failed, vec![ids[1]]);
        let tokens =
            |list: &[(SeqId, Vec<u32>)]| list.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
        assert_eq!(tokens(&finished), tokens(&expected));
        assert!(faulty.has_room() && faulty.free.len() == 3);
    }
}
