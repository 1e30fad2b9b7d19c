//! One sequence's state machine: prompt → chunked prefill → decode → a finish reason, with its
//! sampler, stop-string matcher and incremental detokenizer.

use std::ops::Range;
use std::time::Instant;

use super::constraint::ConstraintMatcher;
use super::logprobs;
use super::prefix_cache::BlockKey;
use super::request::{Event, FinishReason, Request, SeqId, Timings, TokenLogprob};
use super::speculate::{Drafter, Speculation};
use super::stop::StopMatcher;
use crate::config::Pooling;
use crate::kv_cache::StateSnapshot;
use crate::sampling::Sampler;
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// A sequence being prefilled or decoded.
pub(super) struct Sequence<'t> {
    pub(super) id: SeqId,
    /// Whose prompt it is ([`Request::tenant`]).
    pub(super) tenant: u64,
    /// The KV slot it holds.
    pub(super) slot: usize,
    prompt: Vec<u32>,
    max_tokens: usize,
    logprobs: Option<usize>,
    /// Prompt tokens already in the cache.
    prefilled: usize,
    /// Prompt tokens reused from earlier sequences.
    cached: usize,
    /// The prefix cache's keys of this sequence's first blocks, in order.
    pub(super) chain: Vec<BlockKey>,
    /// Whether its next blocks may still go to the prefix cache.
    pub(super) capturing: bool,
    /// The tokens fed at the next decoding step: the last sampled token, then any guesses.
    feed: Vec<u32>,
    /// A recurrent cache's state before a step that verifies guesses, to go back to when
    /// some are rejected.
    pub(super) state_before: StateSnapshot,
    /// The guesser (its history and guess length), when the sequence speculates.
    drafter: Option<Drafter>,
    /// Whether a draft model guesses (else prompt lookup).
    by_model: bool,
    /// Tokens the draft model is to guess this step.
    wanted: usize,
    /// Tokens guessed and guesses confirmed.
    drafted: usize,
    accepted: usize,
    /// Generated tokens.
    generated: Vec<u32>,
    sampler: Sampler,
    tokenizer: &'t Tokenizer,
    stream: Option<StreamDecoder<'t>>,
    stops: StopMatcher,
    /// What the request's constraint still allows.
    constraint: Option<Box<dyn ConstraintMatcher>>,
    /// A copy of the logits row for the log-probabilities (sampling modifies the row).
    logits_copy: Vec<f32>,
    admitted: Instant,
    first_token: Option<Instant>,
    pub(super) finish: Option<FinishReason>,
    /// How it pools its prompt, when it is an embedding request.
    pub(super) pooling: Option<Pooling>,
    /// Whether the forward pass failed on it (it reports no `Finished`).
    pub(super) failed: bool,
    /// Why its constraint could not be followed, when it could not (it then fails with it).
    pub(super) constraint_failure: Option<String>,
}

/// What sampling one token produced, to be reported in order after a parallel step.
pub(super) struct Sampled {
    token: u32,
    text: String,
    logprob: Option<TokenLogprob>,
}

/// What verifying one step's fed tokens produced.
pub(super) struct Verified {
    /// The tokens sampled, in order.
    pub(super) sampled: Vec<Sampled>,
    /// Guesses fed.
    pub(super) drafted: usize,
    /// Of those, guesses confirmed.
    pub(super) accepted: usize,
}

impl<'t> Sequence<'t> {
    /// Starts `request` in KV slot `slot`, whose cache holds the first `reused` prompt tokens
    /// (the prefix cache's blocks `chain` among them); it guesses tokens ahead as
    /// `speculation` says when the request allows it.
    pub(super) fn new(
        id: SeqId,
        slot: usize,
        (reused, chain): (usize, Vec<BlockKey>),
        request: Request,
        (tokenizer, vocab): (&'t Tokenizer, usize),
        speculation: Speculation,
        pooling: Option<Pooling>,
    ) -> Self {
        let draft_max = speculation.draft_max();
        let mut params = request.sampling;
        if !request.penalize_prompt {
            params.penalty_last_n = request.max_tokens;
        }
        let mut sampler = Sampler::new(params, vocab);
        if request.penalize_prompt {
            request.prompt.iter().for_each(|&t| sampler.accept(t));
        }
        Self {
            id,
            tenant: request.tenant,
            slot,
            max_tokens: request.max_tokens,
            logprobs: request.logprobs,
            prefilled: reused,
            cached: reused,
            chain,
            capturing: pooling.is_none(),
            feed: Vec::with_capacity(draft_max + 1),
            state_before: StateSnapshot::default(),
            drafter: (request.speculate && draft_max > 0)
                .then(|| Drafter::new(&request.prompt, draft_max)),
            by_model: matches!(speculation, Speculation::DraftModel { .. }),
            wanted: 0,
            drafted: 0,
            accepted: 0,
            generated: Vec::with_capacity(request.max_tokens.min(4096)),
            sampler,
            tokenizer,
            stream: Some(tokenizer.stream_decoder().showing(&request.shown_controls)),
            stops: StopMatcher::new(request.stop),
            constraint: request.constraint.map(|c| c.start()),
            logits_copy: Vec::new(),
            admitted: Instant::now(),
            first_token: None,
            finish: None,
            pooling,
            failed: false,
            constraint_failure: None,
            prompt: request.prompt,
        }
    }

    /// The tokens fed at `positions` (the prompt, then the generated tokens).
    pub(super) fn fed(&self, positions: Range<usize>) -> Vec<u32> {
        let prompt = self.prompt.len();
        positions
            .map(|i| match i.checked_sub(prompt) {
                None => self.prompt[i],
                Some(g) => self.generated[g],
            })
            .collect()
    }

    /// The prompt's length in tokens.
    pub(super) fn prompt_len(&self) -> usize {
        self.prompt.len()
    }

    /// Prompt tokens not yet in the cache.
    pub(super) fn prompt_left(&self) -> usize {
        self.prompt.len() - self.prefilled
    }

    /// The tokens to run this step: a chunk of at most `budget` prompt tokens, or the last
    /// sampled token and the guesses [`Self::draft`] made.
    pub(super) fn next_tokens(&self, budget: usize) -> &[u32] {
        if self.prompt_left() > 0 {
            let take = self.prompt_left().min(budget);
            &self.prompt[self.prefilled..self.prefilled + take]
        } else {
            &self.feed
        }
    }

    /// Guesses up to `limit` tokens to follow the last one (never past `max_tokens`) for the
    /// next decoding step; returns the rows that step feeds. With a draft model, it decides how
    /// many tokens to guess ([`Self::draft_wanted`]) and counts their rows; the guesses come
    /// through [`Self::take_guesses`].
    pub(super) fn draft(&mut self, limit: usize) -> usize {
        self.feed.truncate(1);
        self.wanted = 0;
        let left = self.max_tokens.saturating_sub(self.generated.len() + 1);
        if let Some(drafter) = &mut self.drafter {
            if self.by_model {
                self.wanted = drafter.budget(limit.min(left));
            } else {
                drafter.draft(limit.min(left), &mut self.feed);
            }
        }
        self.feed.len() + self.wanted
    }

    /// How many tokens the draft model is to guess this step, and the tokens they follow (the
    /// prompt and the generated tokens); `None` when it guesses none.
    pub(super) fn draft_wanted(&self) -> Option<(usize, &[u32])> {
        let drafter = self.drafter.as_ref().filter(|_| self.wanted > 0)?;
        Some((self.wanted, drafter.history()))
    }

    /// Takes the draft model's guesses (at most the number wanted); returns the rows the next
    /// step feeds.
    pub(super) fn take_guesses(&mut self, guesses: &[u32]) -> usize {
        let n = guesses.len().min(self.wanted);
        self.feed.extend_from_slice(&guesses[..n]);
        self.wanted = 0;
        self.feed.len()
    }

    /// Positions of its KV cache that hold fed tokens: every token but the last sampled.
    pub(super) fn kv_len(&self) -> usize {
        self.prompt.len() + self.generated.len().saturating_sub(1)
    }

    /// Samples from the logits `rows` of the fed tokens in order, keeping each guess the draw
    /// confirms; stops at the first draw that differs from the guess (it is the next token) or
    /// at the end of the sequence. Returns what to report and the guesses made and kept.
    pub(super) fn verify(&mut self, rows: &mut [f32], vocab: usize) -> Verified {
        let drafted = self.feed.len().saturating_sub(1);
        let mut sampled = Vec::with_capacity(drafted + 1);
        let mut accepted = 0;
        for (j, row) in rows.chunks_exact_mut(vocab).enumerate() {
            let guess = self.feed.get(j + 1).copied();
            let token = self.sample(row);
            let held = guess == Some(token.token);
            sampled.push(token);
            if !held || self.finish.is_some() || self.failed {
                accepted += usize::from(held);
                break;
            }
            accepted += 1;
        }
        self.feed.clear();
        self.feed.extend(self.generated.last());
        if let Some(drafter) = &mut self.drafter {
            drafter.record(drafted, accepted);
        }
        self.drafted += drafted;
        self.accepted += accepted;
        Verified {
            sampled,
            drafted,
            accepted,
        }
    }

    /// Records that `n` tokens from [`Self::next_tokens`] ran; returns whether the logits row
    /// that came out is for sampling (the prompt is complete).
    pub(super) fn advance(&mut self, n: usize) -> bool {
        if self.prompt_left() > 0 {
            self.prefilled += n;
        }
        self.prompt_left() == 0
    }

    /// Finishes the sequence for `reason` once the text the decoder holds back is out, unless
    /// that text completes a stop string (then it finishes for the stop string).
    fn end(&mut self, reason: FinishReason, emit: &mut impl FnMut(&str)) {
        if let Some(rest) = self.stream.take().and_then(StreamDecoder::finish)
            && self.stops.push(&rest, emit)
        {
            self.finish = Some(FinishReason::StopString);
        } else {
            self.stops.flush(emit);
            self.finish = Some(reason);
        }
    }

    /// Samples the next token from this sequence's logits `row` (which sampling may modify),
    /// decides whether the sequence is finished, and returns what to report.
    fn sample(&mut self, row: &mut [f32]) -> Sampled {
        let logprob_of = self.logprobs.map(|top| {
            self.logits_copy.clear();
            self.logits_copy.extend_from_slice(row);
            logprobs::of_row(&self.logits_copy, top, self.tokenizer)
        });
        if let Some(constraint) = &mut self.constraint {
            constraint.mask(row);
        }
        let token = self.sampler.sample(row);
        let logprob = logprob_of.map(|f| f(token));
        self.sampler.accept(token);
        if let Some(constraint) = &mut self.constraint {
            constraint.accept(token);
        }
        let complete = self.constraint.as_ref().is_some_and(|c| c.is_complete());
        if let Some(why) = self.constraint.as_ref().and_then(|c| c.failure()) {
            self.constraint_failure = Some(why.to_string());
            self.failed = true;
        }
        self.generated.push(token);
        if let Some(drafter) = &mut self.drafter {
            drafter.push(token);
        }
        self.first_token.get_or_insert_with(Instant::now);

        let mut text = String::new();
        let mut emit = |piece: &str| text.push_str(piece);
        if self.tokenizer.is_eog(token) {
            self.stops.flush(&mut emit);
            self.finish = Some(FinishReason::EndOfGeneration);
        } else if let Some(piece) = self.stream.as_mut().and_then(|s| s.push(token))
            && self.stops.push(&piece, &mut emit)
        {
            self.finish = Some(FinishReason::StopString);
        } else if complete {
            self.end(FinishReason::EndOfGeneration, &mut emit);
        } else if self.generated.len() >= self.max_tokens {
            self.end(FinishReason::Length, &mut emit);
        }
        Sampled {
            token,
            text,
            logprob,
        }
    }

    /// Records that its whole prompt ran into `embedding` and ends it; returns the event
    /// reporting the embedding.
    pub(super) fn embedded(&mut self, embedding: &[f32]) -> Event {
        self.prefilled = self.prompt.len();
        self.first_token = Some(Instant::now());
        self.finish = Some(FinishReason::EndOfGeneration);
        Event::Embedding {
            id: self.id,
            embedding: embedding.to_vec(),
        }
    }

    /// The event reporting `sampled`.
    pub(super) fn token_event(&self, sampled: Sampled) -> Event {
        Event::Token {
            id: self.id,
            token: sampled.token,
            text: sampled.text,
            logprob: sampled.logprob,
        }
    }

    /// The event reporting the end of this sequence (`reason` overrides its own, for a
    /// cancellation).
    pub(super) fn finished_event(self, reason: FinishReason) -> Event {
        let now = Instant::now();
        let first = self.first_token.unwrap_or(now);
        Event::Finished {
            id: self.id,
            reason,
            timings: Timings {
                prefill_s: (first - self.admitted).as_secs_f64(),
                decode_s: (now - first).as_secs_f64(),
                prompt_tokens: self.prompt.len(),
                cached_tokens: self.cached,
                generated_tokens: self.generated.len(),
                drafted_tokens: self.drafted,
                accepted_tokens: self.accepted,
            },
            tokens: self.generated,
        }
    }
}
