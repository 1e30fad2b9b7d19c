//! What a front end asks of the engine, and what the engine reports back.

use std::sync::Arc;

use super::constraint::TokenConstraint;
use crate::sampling::SamplingParams;

/// The engine's name for one sequence, unique for the engine's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u64);

/// One generation to run.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The prompt, already tokenized (with BOS if the model wants it); never empty.
    pub prompt: Vec<u32>,
    /// The most tokens to generate (at least 1).
    pub max_tokens: usize,
    /// How to choose tokens.
    pub sampling: SamplingParams,
    /// Generation stops before any of these strings; they are not part of the text.
    pub stop: Vec<String>,
    /// Report each generated token's log-probability with this many alternatives.
    pub logprobs: Option<usize>,
    /// Whether the penalties' window also covers the prompt (llama.cpp's repeat penalty), or
    /// only the generated tokens (OpenAI's frequency and presence penalties).
    pub penalize_prompt: bool,
    /// A rule the generated text must follow (a JSON schema, a grammar); `None`: any text.
    pub constraint: Option<Arc<dyn TokenConstraint>>,
    /// Whether it may guess tokens ahead when the engine speculates (the text is the same
    /// either way; only the time differs).
    pub speculate: bool,
    /// Whose prompt this is: a sequence reuses only the cached prefixes (a slot's history, the
    /// prefix cache's blocks) of sequences of the same tenant, so that neither what it reuses
    /// nor how fast it starts tells anything about another tenant's prompts. A front end with
    /// one user leaves it 0.
    pub tenant: u64,
    /// Control tokens whose text the generated text keeps (they print as nothing otherwise),
    /// for a front end that reads the model's markup back (gpt-oss's `<|channel|>`) and takes
    /// it out of what it shows.
    pub shown_controls: Vec<u32>,
    /// Whether to pool the prompt into an embedding ([`Event::Embedding`]) instead of
    /// generating: the model must be an embedding model, and the prompt runs in one pass.
    pub embed: bool,
}

impl Request {
    /// A request for up to `max_tokens` tokens after `prompt`, sampled with llama.cpp's
    /// defaults, with no stop strings.
    pub fn new(prompt: Vec<u32>, max_tokens: usize) -> Self {
        Self {
            prompt,
            max_tokens,
            penalize_prompt: true,
            speculate: true,
            ..Self::default()
        }
    }

    /// A request for the embedding of `prompt` (tokenized with the model's special tokens),
    /// pooled as the model says.
    pub fn embedding(prompt: Vec<u32>) -> Self {
        Self {
            prompt,
            max_tokens: 1,
            embed: true,
            ..Self::default()
        }
    }

    /// The same request, sampled with `sampling`.
    pub fn with_sampling(mut self, sampling: SamplingParams) -> Self {
        self.sampling = sampling;
        self
    }

    /// The same request, stopping before any of `stop`.
    pub fn with_stop(mut self, stop: Vec<String>) -> Self {
        self.stop = stop;
        self
    }
}

/// Why a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// The text reached one of the request's stop strings.
    StopString,
    /// `max_tokens` were generated.
    Length,
    /// The front end cancelled it (its client went away).
    Cancelled,
}

impl FinishReason {
    /// The name OpenAI's API gives this reason (`stop`, `length`; `cancelled` otherwise).
    pub fn api_name(self) -> &'static str {
        match self {
            Self::EndOfGeneration | Self::StopString => "stop",
            Self::Length => "length",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The log-probability of one generated token and of the most likely alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its natural-log probability under the model (before any sampling filter).
    pub logprob: f32,
    /// The most likely tokens at this position, most likely first: bytes and log-probability.
    pub top: Vec<(Vec<u8>, f32)>,
}

/// Wall-clock times of one sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Seconds from admission to the first generated token (the prompt's evaluation).
    pub prefill_s: f64,
    /// Seconds from the first generated token to the last.
    pub decode_s: f64,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Of those, tokens reused from the prefix cache instead of computed.
    pub cached_tokens: usize,
    /// Generated tokens.
    pub generated_tokens: usize,
    /// Tokens guessed ahead by speculation.
    pub drafted_tokens: usize,
    /// Of those, tokens the model confirmed.
    pub accepted_tokens: usize,
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prefill_tok_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_s.max(1e-9)
    }

    /// Tokens decoded after the first one (the first comes out of the prefill).
    pub fn decoded_tokens(&self) -> usize {
        self.generated_tokens.saturating_sub(1)
    }

    /// Decoded tokens per second, `None` when no token was decoded after the first.
    pub fn decode_tok_s(&self) -> Option<f64> {
        let n = self.decoded_tokens();
        (n > 0).then(|| n as f64 / self.decode_s.max(1e-9))
    }
}

/// What a step did for one sequence, in order.
#[derive(Debug)]
pub enum Event {
    /// A new token and the text it completed (possibly empty: half a character, or text held
    /// back because it may start a stop string).
    Token {
        /// The sequence.
        id: SeqId,
        /// The token.
        token: u32,
        /// Text now safe to show: never half a character, never part of a stop string, no
        /// control tokens (but those the request's `shown_controls` names).
        text: String,
        /// Its log-probability, when the request asked for them.
        logprob: Option<TokenLogprob>,
    },
    /// The embedding of an embedding request's prompt, pooled as the model says and not
    /// normalised; [`Event::Finished`] follows.
    Embedding {
        /// The sequence.
        id: SeqId,
        /// `[hidden]` values.
        embedding: Vec<f32>,
    },
    /// The sequence ended; its KV memory is free again.
    Finished {
        /// The sequence.
        id: SeqId,
        /// Why.
        reason: FinishReason,
        /// Every generated token (an end-of-generation token that stopped it included).
        tokens: Vec<u32>,
        /// Times and token counts.
        timings: Timings,
    },
    /// The sequence failed in the forward pass (the sequences beside it went on).
    Failed {
        /// The sequence.
        id: SeqId,
        /// What went wrong.
        error: crate::error::ModelError,
    },
}

/// A whole generation, as [`Engine::generate`](super::Engine::generate) returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Generated token ids (an end-of-generation token that stopped it included).
    pub tokens: Vec<u32>,
    /// Generated text, stop strings and control tokens removed.
    pub text: String,
    /// Why it ended.
    pub finish: FinishReason,
    /// Times.
    pub timings: Timings,
}
