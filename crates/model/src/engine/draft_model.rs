//! Speculation with a draft model: a second, smaller model that shares the target's vocabulary
//! guesses each sequence's next tokens, greedily. Its argmax is a deterministic guess, so the
//! acceptance rule of `speculate` applies unchanged and the output never changes.
//!
//! The draft model runs on the target's device, through an executor of its own (on a GPU, its
//! weights and KV pool there too; where the GPU cannot run it, on the CPU, saying why). It
//! keeps a KV cache per slot and remembers the tokens it holds. Before guessing, a cache is
//! cut back to the longest prefix it shares with its sequence (so the guesses the target
//! rejected go, and a slot's next sequence keeps what it shares with the last one) and fed
//! what it lacks: the prompt at first, then the tokens confirmed since. Every sequence's tokens
//! run in one batched pass per guessed position: a sequence feeding one token as a decode row
//! (on a GPU, the batched decode pass), several as a prompt chunk.

use std::panic::AssertUnwindSafe;

use super::device::DeviceReport;
use super::executor::{Executor, SeqCache, Sizes, cache_bytes};
use super::reuse::Rings;
use crate::error::ModelError;
use crate::forward::{Logits, Model};
use crate::loaded::LoadedModel;
use crate::sampling::argmax;

/// The draft model, its executor and its per-slot KV caches.
pub(super) struct DraftModel<'m> {
    model: &'m Model,
    executor: Executor<'m>,
    caches: Vec<SeqCache>,
    device: DeviceReport,
    /// The tokens each slot's cache holds.
    held: Vec<Vec<u32>>,
    rings: Rings,
    max_batch: usize,
}

/// One sequence's request for guesses: its slot, its tokens so far (the prompt and the
/// generated tokens) and how many tokens to guess after them.
pub(super) struct Want<'a> {
    pub(super) slot: usize,
    pub(super) history: &'a [u32],
    pub(super) n: usize,
}

/// One sequence's guessing in progress.
struct Job {
    slot: usize,
    /// Tokens to feed before the next guess.
    pending: Vec<u32>,
    n: usize,
    guesses: Vec<u32>,
}

impl<'m> DraftModel<'m> {
    /// The draft model `draft` over `started`, its executor with a KV cache per sequence,
    /// started for [`Sizes::for_draft`] of the target's sizes `sizes` (check its vocabulary
    /// first: [`check_vocabulary`]).
    pub(super) fn start(
        draft: &'m LoadedModel,
        sizes: Sizes,
        (executor, caches, device): (Executor<'m>, Vec<SeqCache>, DeviceReport),
    ) -> Result<Self, ModelError> {
        let config = &draft.model.config;
        draft.model.check_context(sizes.context)?;
        Ok(Self {
            model: &draft.model,
            executor,
            held: vec![Vec::new(); caches.len()],
            caches,
            device,
            rings: Rings::new(config, sizes.context, sizes.max_batch),
            max_batch: sizes.max_batch,
        })
    }

    /// Where it runs.
    pub(super) fn device(&self) -> &DeviceReport {
        &self.device
    }

    /// Memory of its KV caches (on its device) and its host buffers, in bytes.
    pub(super) fn bytes(&self) -> usize {
        cache_bytes(&self.caches) + self.executor.scratch_bytes()
    }

    /// The guesses for each of `wants`, in order: `n` tokens each, or fewer when a pass fails
    /// (it is logged; the guesses are only guesses, so decoding goes on).
    pub(super) fn guess(&mut self, wants: &[Want<'_>]) -> Vec<Vec<u32>> {
        let mut jobs: Vec<Job> = wants.iter().map(|want| self.catch_up(want)).collect();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| self.run(&mut jobs)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "the draft model's pass failed"),
            Err(_) => {
                tracing::warn!("the draft model's pass panicked; its caches start over");
                self.caches.iter_mut().for_each(SeqCache::clear);
                self.held.iter_mut().for_each(Vec::clear);
            }
        }
        jobs.into_iter().map(|job| job.guesses).collect()
    }

    /// Cuts `want`'s cache back to what it shares with the sequence (keeping at least one token
    /// to feed) and returns the job that feeds the rest.
    fn catch_up(&mut self, want: &Want<'_>) -> Job {
        let held = &mut self.held[want.slot];
        let common = held
            .iter()
            .zip(want.history)
            .take_while(|(a, b)| a == b)
            .count()
            .min(want.history.len().saturating_sub(1));
        let keep = if self.rings.can_cut(held.len(), common) {
            common
        } else {
            0
        };
        held.truncate(keep);
        self.caches[want.slot].truncate(keep);
        Job {
            slot: want.slot,
            pending: want.history[keep..].to_vec(),
            n: want.n,
            guesses: Vec::with_capacity(want.n),
        }
    }

    /// Feeds the jobs in batched passes until each has its guesses; a pass takes every job's
    /// pending tokens that fit, so a long catch-up runs over several passes.
    fn run(&mut self, jobs: &mut [Job]) -> Result<(), ModelError> {
        let vocab = self.model.config.vocab_size;
        loop {
            let max_batch = self.max_batch;
            let mut room = max_batch;
            let mut parts = Vec::with_capacity(jobs.len());
            for (j, job) in jobs.iter().enumerate() {
                if job.guesses.len() < job.n && !job.pending.is_empty() && room > 0 {
                    let take = job.pending.len().min(room);
                    room -= take;
                    parts.push((j, take));
                }
            }
            if parts.is_empty() {
                return Ok(());
            }
            let mut by_slot: Vec<Option<&mut SeqCache>> =
                self.caches.iter_mut().map(Some).collect();
            let batch = parts
                .iter()
                .map(|&(j, take)| {
                    let cache = by_slot[jobs[j].slot]
                        .take()
                        .expect("each sequence guesses in its own slot");
                    // One token is decoded (every logits row of it wanted); several are a
                    // prompt chunk, whose last row is wanted.
                    let logits = if take == 1 { Logits::All } else { Logits::Last };
                    (&jobs[j].pending[..take], logits, cache)
                })
                .collect();
            let rows = self.executor.forward(self.model, batch)?.logits;
            for (&(j, take), row) in parts.iter().zip(rows.chunks_exact(vocab)) {
                let job = &mut jobs[j];
                self.held[job.slot].extend(job.pending.drain(..take));
                if job.pending.is_empty() {
                    let guess = argmax(row);
                    job.guesses.push(guess);
                    if job.guesses.len() < job.n {
                        job.pending.push(guess);
                    }
                }
            }
        }
    }
}

/// Refuses a draft model whose vocabulary is not the target's: another size, or another token
/// at some id (its guesses would be other tokens than they mean).
pub(super) fn check_vocabulary(
    target: &LoadedModel,
    draft: &LoadedModel,
) -> Result<(), ModelError> {
    let (ours, theirs) = (&target.tokenizer, &draft.tokenizer);
    let sizes = (
        target.model.config.vocab_size,
        draft.model.config.vocab_size,
        ours.vocab_size(),
        theirs.vocab_size(),
    );
    if sizes.0 != sizes.1 || sizes.2 != sizes.3 {
        return Err(ModelError::DraftModel(format!(
            "its vocabulary has {} tokens ({} logits), the model's {} ({} logits); a draft \
             model must share the model's tokenizer (take a smaller model of the same family)",
            sizes.3, sizes.1, sizes.2, sizes.0
        )));
    }
    let differs = (0..ours.vocab_size() as u32).find(|&id| {
        ours.token_text(id) != theirs.token_text(id) || ours.token_type(id) != theirs.token_type(id)
    });
    if let Some(id) = differs {
        let show =
            |t: &crate::tokenizer::Tokenizer| format!("{:?}", t.token_text(id).unwrap_or(""));
        return Err(ModelError::DraftModel(format!(
            "its token {id} is {}, the model's is {}; a draft model must share the model's \
             tokenizer (take a smaller model of the same family)",
            show(theirs),
            show(ours)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rinfer_formats::gguf::{GgufFile, MetadataValue};

    use super::check_vocabulary;
    use crate::loaded::LoadedModel;
    use crate::tokenizer::Tokenizer;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/models/gemma3-tiny-q4_k_m.gguf"
    );

    #[test]
    fn a_draft_vocabulary_of_the_same_size_with_another_token_is_refused() {
        let target = LoadedModel::open(FIXTURE).unwrap();
        let mut draft = LoadedModel::open(FIXTURE).unwrap();
        assert!(check_vocabulary(&target, &draft).is_ok());

        let mut meta = GgufFile::open(FIXTURE).unwrap().metadata().clone();
        let Some(MetadataValue::Array { element, mut items }) =
            meta.remove("tokenizer.ggml.tokens")
        else {
            panic!("the fixture lists its tokens");
        };
        items[300] = MetadataValue::String("an impostor".into());
        let tokens = MetadataValue::Array { element, items };
        meta.insert("tokenizer.ggml.tokens", tokens).unwrap();
        draft.tokenizer = Tokenizer::from_gguf(&meta).unwrap();

        let err = check_vocabulary(&target, &draft).unwrap_err().to_string();
        assert!(
            err.contains("token 300") && err.contains("impostor"),
            "{err}"
        );
    }
}
