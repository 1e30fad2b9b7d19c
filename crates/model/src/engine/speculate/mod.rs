//! Speculative decoding: a decoding sequence guesses its next tokens, the step feeds the last
//! token and the guesses together and gets logits for every one of them, and the sequence keeps
//! the guesses its own sampler agrees with. The guesses come from prompt lookup (an earlier
//! occurrence of its last few tokens, in the prompt or in what it generated) or from a draft
//! model's greedy continuation (`draft_model`).
//!
//! The output never changes. At each fed position the sampler draws the token exactly as plain
//! decoding would (same logits, whatever the batch; same penalty history; the next draw of the
//! same seeded generator), and a guess is accepted only if it equals that draw. The first draw
//! that differs is the next token itself, and the positions after it are cut from the KV cache.
//! Both sources guess deterministically (the draft distribution `q` is one-hot; a draft model's
//! guess is its argmax), and for such a guess this is the speculative sampling rule: the guess
//! is accepted with probability `p(guess)`, and a rejection yields a token drawn from `p`
//! without the guess, the normalized `max(0, p - q)`.
//!
//! Prompt lookup follows the text a sequence is repeating and finds where it continues after an
//! edit ([`drafter`]), guessing an edit the text has made once wherever the text it follows
//! repeats the edited tokens ([`edits`]); the searches it uses are in [`lookup`]. How many
//! tokens to guess follows the recent acceptance, and guesses that keep failing make a
//! sequence wait before guessing again, so free text, where guesses rarely hold, runs as plain
//! decoding almost always.
//!
//! A rejected guess is cut back from the KV cache (to `Sequence::kv_len`) before the step's
//! blocks go to the prefix cache, so rejected positions never reach it. A sliding-window ring
//! allows the cut only while it still holds the window before it; the rings have
//! `window + max_batch` slots and a step feeds at most `max_batch` rows, so a cut of at most
//! `draft_max < max_batch` positions always qualifies (the planner checks it anyway).
//!
//! On the GPU a sequence's last token and its guesses are rows of the batched decode pass
//! (`GpuDevice::forward_rows`), never the prefill step: every row there is computed as that
//! token decoded alone (the same kernels, each row's reductions in a fixed order whatever the
//! number of rows, each row attending to the cache up to its own position), so the verified
//! logits are those of plain decoding bit for bit. The rejected positions are cut from the
//! sequence's block table, their blocks given back to the pool.

mod drafter;
mod edits;
mod lookup;

pub(super) use drafter::Drafter;

/// Whether and how far the engine speculates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Speculation {
    /// Plain decoding: one token per sequence per step.
    #[default]
    Off,
    /// Prompt lookup: guesses from earlier occurrences of the last tokens, at most `draft_max`
    /// per step.
    PromptLookup {
        /// The most tokens guessed in one step.
        draft_max: usize,
    },
    /// A draft model that shares the vocabulary guesses greedily, at most `draft_max` tokens
    /// per step (the engine is given the model: [`Engine::with_draft`](super::Engine::with_draft)).
    DraftModel {
        /// The most tokens guessed in one step.
        draft_max: usize,
    },
}

impl Speculation {
    /// The most tokens guessed in one step (0 when off).
    pub fn draft_max(self) -> usize {
        match self {
            Self::Off => 0,
            Self::PromptLookup { draft_max } | Self::DraftModel { draft_max } => draft_max,
        }
    }
}

/// Guesses and how many of them the model confirmed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpeculationStats {
    /// Steps in which a sequence fed guesses.
    pub drafts: u64,
    /// Tokens guessed.
    pub drafted_tokens: u64,
    /// Guessed tokens the model confirmed (each one a token gained without its own step).
    pub accepted_tokens: u64,
}

impl SpeculationStats {
    /// Confirmed guesses over all guesses (0 when none was made).
    pub fn acceptance_rate(&self) -> f64 {
        crate::engine::share(self.accepted_tokens, self.drafted_tokens)
    }

    /// Adds one verification of `drafted` guesses of which `accepted` held.
    pub(super) fn record(&mut self, drafted: usize, accepted: usize) {
        self.drafts += 1;
        self.drafted_tokens += drafted as u64;
        self.accepted_tokens += accepted as u64;
    }
}
