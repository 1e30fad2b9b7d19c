//! Generating text: prefill the prompt in batches, then decode token by token, streaming text
//! and stopping at end-of-generation tokens, stop strings or the token limit.

use std::time::Instant;

use crate::error::ModelError;
use crate::forward::{Logits, Model};
use crate::kv_cache::KvCache;
use crate::sampling::{Sampler, SamplingParams};
use crate::scratch::Scratch;
use crate::tokenizer::Tokenizer;

/// What to generate.
#[derive(Clone, Debug, Default)]
pub struct GenerateRequest {
    /// The prompt, already tokenized (with BOS if the model wants it).
    pub prompt: Vec<u32>,
    /// The most tokens to generate.
    pub max_tokens: usize,
    /// How to choose tokens.
    pub sampling: SamplingParams,
    /// Generation stops before any of these strings; they are not part of the text.
    pub stop: Vec<String>,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens` were generated.
    Length,
}

/// Wall-clock times of one generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Seconds spent on the prompt.
    pub prefill_s: f64,
    /// Seconds spent generating after the first token.
    pub decode_s: f64,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub generated_tokens: usize,
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prefill_tok_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_s.max(1e-9)
    }

    /// Generated tokens per second after the first.
    pub fn decode_tok_s(&self) -> f64 {
        self.generated_tokens.saturating_sub(1) as f64 / self.decode_s.max(1e-9)
    }
}

/// The result of one generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Generated token ids (an end-of-generation token that stopped it included).
    pub tokens: Vec<u32>,
    /// Generated text, stop strings and end-of-generation tokens removed.
    pub text: String,
    /// Why it ended.
    pub finish: FinishReason,
    /// Times.
    pub timings: Timings,
}

/// Generates a continuation of `request.prompt` into a fresh `cache`, calling `on_text` with
/// each piece of text as soon as it is complete (never half a UTF-8 character, never part of a
/// stop string).
pub fn generate(
    model: &Model,
    tokenizer: &Tokenizer,
    request: &GenerateRequest,
    cache: &mut KvCache,
    scratch: &mut Scratch,
    mut on_text: impl FnMut(&str),
) -> Result<Generation, ModelError> {
    let prompt = &request.prompt;
    if prompt.is_empty() {
        return Err(ModelError::InvalidConfig("the prompt is empty".into()));
    }
    if prompt.len() + request.max_tokens > cache.context() {
        return Err(ModelError::ContextOverflow {
            prompt: prompt.len(),
            requested: request.max_tokens,
            context: cache.context(),
        });
    }
    cache.clear();
    let mut sampler = Sampler::new(request.sampling.clone(), model.config.vocab_size);
    prompt.iter().for_each(|&t| sampler.accept(t));
    let mut stream = tokenizer.stream_decoder();
    let mut stops = StopMatcher::new(request.stop.clone());
    let mut timings = Timings {
        prompt_tokens: prompt.len(),
        ..Timings::default()
    };

    let start = Instant::now();
    let logits = model.forward(prompt, cache, scratch, Logits::Last)?;
    let mut next = sampler.sample(&mut logits.to_vec());
    timings.prefill_s = start.elapsed().as_secs_f64();

    let decode_start = Instant::now();
    let mut tokens = Vec::with_capacity(request.max_tokens);
    let mut finish = FinishReason::Length;
    while tokens.len() < request.max_tokens {
        tokens.push(next);
        sampler.accept(next);
        if tokenizer.is_eog(next) {
            finish = FinishReason::Stop;
            break;
        }
        if let Some(piece) = stream.push(next)
            && stops.push(&piece, &mut on_text)
        {
            finish = FinishReason::Stop;
            break;
        }
        if tokens.len() == request.max_tokens {
            break;
        }
        let logits = model.forward(&[next], cache, scratch, Logits::Last)?;
        next = sampler.sample(&mut logits.to_vec());
    }
    if finish == FinishReason::Length
        && let Some(rest) = stream.finish()
    {
        stops.push(&rest, &mut on_text);
    }
    if finish == FinishReason::Length || !stops.stopped {
        stops.flush(&mut on_text);
    }
    timings.decode_s = decode_start.elapsed().as_secs_f64();
    timings.generated_tokens = tokens.len();
    Ok(Generation {
        tokens,
        text: stops.text,
        finish,
        timings,
    })
}

/// Finds stop strings in streamed text, holding back any tail that could start one.
///
/// ```
/// use rinfer_model::generate::StopMatcher;
///
/// let mut stops = StopMatcher::new(vec!["END".into()]);
/// let mut out = String::new();
/// assert!(!stops.push("a E", &mut |t| out.push_str(t)));
/// assert_eq!(out, "a ");
/// assert!(stops.push("ND b", &mut |t| out.push_str(t)));
/// assert_eq!(out, "a ");
/// ```
pub struct StopMatcher {
    stops: Vec<String>,
    /// All text so far (cut at a stop string once found).
    pub(crate) text: String,
    /// Bytes of `text` already handed out.
    emitted: usize,
    pub(crate) stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings never match).
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops,
            text: String::new(),
            emitted: 0,
            stopped: false,
        }
    }

    /// Adds `piece`; hands out what is safe; returns whether a stop string was found.
    pub fn push(&mut self, piece: &str, on_text: &mut impl FnMut(&str)) -> bool {
        let search_from = self.emitted;
        self.text.push_str(piece);
        let found = self
            .stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| {
                self.text[search_from..]
                    .find(s.as_str())
                    .map(|i| search_from + i)
            })
            .min();
        if let Some(at) = found {
            self.text.truncate(at);
            self.flush(on_text);
            self.stopped = true;
            return true;
        }
        let held = self
            .stops
            .iter()
            .map(|s| longest_prefix_suffix(&self.text[self.emitted..], s))
            .max()
            .unwrap_or(0);
        let safe = self.text.len() - held;
        if safe > self.emitted {
            on_text(&self.text[self.emitted..safe]);
            self.emitted = safe;
        }
        false
    }

    /// Hands out the text held back (at the end of a generation that did not stop on a string).
    pub fn flush(&mut self, on_text: &mut impl FnMut(&str)) {
        if self.text.len() > self.emitted {
            on_text(&self.text[self.emitted..]);
            self.emitted = self.text.len();
        }
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `stop`, on a char
/// boundary of `text`.
fn longest_prefix_suffix(text: &str, stop: &str) -> usize {
    let max = stop.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && stop
                    .as_bytes()
                    .starts_with(&text.as_bytes()[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopMatcher::new(stops);
        let mut out = String::new();
        let mut stopped = false;
        for p in pieces {
            if m.push(p, &mut |t| out.push_str(t)) {
                stopped = true;
                break;
            }
        }
        if !stopped {
            m.flush(&mut |t| out.push_str(t));
        }
        (out, m.text, stopped)
    }

    #[test]
    fn stop_string_split_across_pieces_is_never_emitted() {
        let (out, text, stopped) = run(&["\n\nUser:"], &["Hello", "\n", "\nUs", "er:", " more"]);
        assert_eq!(
            (out.as_str(), text.as_str(), stopped),
            ("Hello", "Hello", true)
        );
    }

    #[test]
    fn a_false_start_is_released() {
        let (out, _, stopped) = run(&["END"], &["a E", "N", "x", "b"]);
        assert_eq!((out.as_str(), stopped), ("a ENxb", false));
    }
}
