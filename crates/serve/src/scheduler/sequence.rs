//! One running request: its KV slot, where it is in its prompt, and its decoding state.

use std::time::Instant;

use rinfer_model::{FinishReason, KvCache, Sampler, StopMatcher, StreamDecoder, Tokenizer};

use super::job::{Event, Job, TokenLogprob};
use super::logprobs;

/// A KV cache and a logits buffer, allocated once and lent to one sequence at a time.
pub struct Slot {
    /// The sequence's keys and values.
    pub cache: KvCache,
    /// A copy of the sequence's logits row, which sampling may modify `[vocab]`.
    pub logits: Vec<f32>,
}

/// A request being prefilled or decoded.
pub struct Sequence<'t> {
    job: Job,
    slot: Slot,
    /// Prompt tokens already in the cache.
    prefilled: usize,
    /// The last sampled token, fed at the next step.
    last: [u32; 1],
    generated: usize,
    sampler: Sampler,
    tokenizer: &'t Tokenizer,
    stream: Option<StreamDecoder<'t>>,
    stops: StopMatcher,
    /// When the previous token was sent (for the inter-token latency).
    last_token_at: Option<Instant>,
    finished: bool,
}

/// What one step did for a sequence, for the metrics.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepReport {
    /// Seconds from arrival to the first token, when this step produced it.
    pub first_token_s: Option<f64>,
    /// Seconds since the previous token, when this step produced a later one.
    pub inter_token_s: Option<f64>,
}

impl<'t> Sequence<'t> {
    /// Starts `job` in `slot` (whose cache is cleared).
    pub fn new(job: Job, mut slot: Slot, tokenizer: &'t Tokenizer, vocab: usize) -> Self {
        slot.cache.clear();
        let mut params = job.sampling.clone();
        // OpenAI's penalties count every generated token, and only those.
        params.penalty_last_n = job.max_tokens;
        let sampler = Sampler::new(params, vocab);
        let stops = StopMatcher::new(job.stop.clone());
        Self {
            job,
            slot,
            prefilled: 0,
            last: [0],
            generated: 0,
            sampler,
            tokenizer,
            stream: Some(tokenizer.stream_decoder()),
            stops,
            last_token_at: None,
            finished: false,
        }
    }

    /// Whether the client went away.
    pub fn cancelled(&self) -> bool {
        self.job.events.is_closed()
    }

    /// Whether the sequence is done (its slot can be taken back).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Prompt tokens not yet in the cache.
    pub fn prompt_left(&self) -> usize {
        self.job.prompt.len() - self.prefilled
    }

    /// Positions in the cache.
    pub fn cached(&self) -> usize {
        self.slot.cache.len()
    }

    /// The tokens to run this step (`budget` bounds a prompt chunk) and the cache they go to.
    pub fn next_tokens(&mut self, budget: usize) -> (&[u32], &mut KvCache) {
        let tokens = if self.prompt_left() > 0 {
            let take = self.prompt_left().min(budget);
            &self.job.prompt[self.prefilled..self.prefilled + take]
        } else {
            &self.last[..]
        };
        (tokens, &mut self.slot.cache)
    }

    /// Records that `n` tokens from [`Self::next_tokens`] ran; returns whether the logits row
    /// that came out is for sampling (the prompt is complete).
    pub fn advance(&mut self, n: usize) -> bool {
        if self.prompt_left() > 0 {
            self.prefilled += n;
        }
        self.prompt_left() == 0
    }

    /// Samples the next token from this sequence's logits `row`, streams its text and
    /// decides whether the sequence is finished.
    pub fn sample(&mut self, row: &[f32]) -> StepReport {
        let logprob = self
            .job
            .logprobs
            .map(|top| logprobs::of_row(row, top, self.tokenizer));
        let buffer = &mut self.slot.logits;
        buffer.copy_from_slice(row);
        let token = self.sampler.sample(buffer);
        let mut logprob = logprob.map(|f| f(token));
        self.sampler.accept(token);
        self.last = [token];
        self.generated += 1;

        let now = Instant::now();
        let report = match self.last_token_at.replace(now) {
            None => StepReport {
                first_token_s: Some((now - self.job.arrived).as_secs_f64()),
                inter_token_s: None,
            },
            Some(previous) => StepReport {
                first_token_s: None,
                inter_token_s: Some((now - previous).as_secs_f64()),
            },
        };

        let mut text = String::new();
        let mut emit = |piece: &str| text.push_str(piece);
        let mut finish = None;
        if self.tokenizer.is_eog(token) {
            finish = Some(FinishReason::Stop);
        } else if let Some(piece) = self.stream.as_mut().and_then(|s| s.push(token))
            && self.stops.push(&piece, &mut emit)
        {
            finish = Some(FinishReason::Stop);
        } else if self.generated == self.job.max_tokens {
            if let Some(rest) = self.stream.take().and_then(StreamDecoder::finish)
                && self.stops.push(&rest, &mut emit)
            {
                finish = Some(FinishReason::Stop);
            } else {
                self.stops.flush(&mut emit);
                finish = Some(FinishReason::Length);
            }
        }
        if finish == Some(FinishReason::Stop) && self.tokenizer.is_eog(token) {
            self.stops.flush(&mut emit);
        }
        let logprobs: Vec<TokenLogprob> = logprob.take().into_iter().collect();
        if !text.is_empty() || !logprobs.is_empty() {
            self.send(Event::Delta { text, logprobs });
        }
        if let Some(finish) = finish {
            self.finish(finish);
        }
        report
    }

    fn finish(&mut self, finish: FinishReason) {
        self.send(Event::Done {
            finish,
            prompt_tokens: self.job.prompt.len(),
            completion_tokens: self.generated,
        });
        self.finished = true;
    }

    /// Ends the sequence with an engine error.
    pub fn fail(&mut self, message: &str) {
        self.send(Event::Failed(message.to_string()));
        self.finished = true;
    }

    fn send(&self, event: Event) {
        // A closed channel means the client left; the next step frees the slot.
        let _ = self.job.events.send(event);
    }

    /// Gives the slot back.
    pub fn into_slot(self) -> Slot {
        self.slot
    }
}
