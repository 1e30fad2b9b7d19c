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
//! guess is its argmax), and for such a guess this is the speculative sampling rule: the guess is accepted with probability `p(guess)`, and a rejection yields a
//! token drawn from `p` without the guess, the normalized `max(0, p - q)`.
//!
//! How many tokens to guess follows the recent acceptance: longer after a fully accepted guess,
//! shorter after a partial one, and after guesses that were all rejected the sequence waits 1,
//! 3, 7 … steps before guessing again, so free text, where guesses rarely hold, runs as plain
//! decoding almost always.
//!
//! A rejected guess is cut back from the KV cache (to `Sequence::kv_len`) before the step's
//! blocks go to the prefix cache, so rejected positions never reach it. A sliding-window ring
//! allows the cut only while it still holds the window before it; the rings have
//! `window + max_batch` slots and a step feeds at most `max_batch` rows, so a cut of at most
//! `draft_max < max_batch` positions always qualifies (the planner checks it anyway).
//!
//! The CPU only: on the GPU the engine decodes plainly, because exactness needs the
//! verification pass to give the logits of single-token decoding, and the GPU's single-token
//! step (split attention, a CUDA graph) is not shown to match its multi-token step bit for bit.

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
        if self.drafted_tokens == 0 {
            0.0
        } else {
            self.accepted_tokens as f64 / self.drafted_tokens as f64
        }
    }

    /// Adds one verification of `drafted` guesses of which `accepted` held.
    pub(super) fn record(&mut self, drafted: usize, accepted: usize) {
        self.drafts += 1;
        self.drafted_tokens += drafted as u64;
        self.accepted_tokens += accepted as u64;
    }
}

/// The shortest run of last tokens a lookup matches: a single repeated token predicts too
/// little.
const NGRAM_MIN: usize = 2;
/// The longest run of last tokens compared: longer matches count as this long.
const MATCH_MAX: usize = 64;
/// The longest wait, in steps, after guesses that were all rejected.
const MAX_WAIT: u32 = 31;

/// One sequence's guesser: its tokens so far and its adaptive guess length.
pub(super) struct Drafter {
    /// The prompt and the generated tokens.
    history: Vec<u32>,
    draft_max: usize,
    /// How many tokens the next guess may have.
    length: usize,
    /// Guesses in a row that were all rejected.
    misses: u32,
    /// Steps left before the next guess.
    wait: u32,
}

impl Drafter {
    /// A guesser over `prompt` guessing at most `draft_max` tokens (none when 0).
    pub(super) fn new(prompt: &[u32], draft_max: usize) -> Self {
        Self {
            history: prompt.to_vec(),
            draft_max,
            length: draft_max.min(4),
            misses: 0,
            wait: 0,
        }
    }

    /// Records a token the sequence produced.
    pub(super) fn push(&mut self, token: u32) {
        self.history.push(token);
    }

    /// The prompt and the generated tokens.
    pub(super) fn history(&self) -> &[u32] {
        &self.history
    }

    /// How many tokens to guess this step, at most `limit` (0 while waiting); each call is a
    /// step.
    pub(super) fn budget(&mut self, limit: usize) -> usize {
        if self.wait > 0 {
            self.wait -= 1;
            return 0;
        }
        limit.min(self.length)
    }

    /// Up to `limit` guessed tokens to follow the history by prompt lookup (none while waiting
    /// or when nothing matches).
    pub(super) fn draft(&mut self, limit: usize, out: &mut Vec<u32>) {
        let n = self.budget(limit);
        out.extend_from_slice(lookup(&self.history, n));
    }

    /// Adapts the guess length to a verification of `drafted` guesses of which `accepted`
    /// held.
    pub(super) fn record(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        if accepted == 0 {
            self.misses += 1;
            self.wait = (1u32 << self.misses.min(5)).saturating_sub(1).min(MAX_WAIT);
            self.length = (self.length / 2).max(1);
        } else {
            self.misses = 0;
            self.length = if accepted == drafted {
                (self.length + 2).min(self.draft_max)
            } else {
                (accepted + 1).min(self.draft_max)
            };
        }
    }
}

/// The up to `n` tokens that followed the earlier occurrence of the history's last tokens that
/// matches the most of them (at least `NGRAM_MIN`, compared up to `MATCH_MAX`; the latest of
/// the longest); empty when none occurred. While guesses hold, the occurrence they came from
/// keeps matching longer than any other, so the guesses continue along it: in a copied file,
/// the place being copied, not the latest line that happens to end the same way.
pub(super) fn lookup(history: &[u32], n: usize) -> &[u32] {
    let len = history.len();
    let Some(&last) = history.last() else {
        return &[];
    };
    if n == 0 {
        return &[];
    }
    // `from`: the position an occurrence predicts next (it ends at `from - 1`).
    let mut best: Option<(usize, usize)> = None;
    for from in (NGRAM_MIN..len).rev() {
        if history[from - 1] != last {
            continue;
        }
        let matched = (1..=MATCH_MAX.min(from))
            .take_while(|&k| history[from - k] == history[len - k])
            .count();
        if matched >= NGRAM_MIN && best.is_none_or(|(most, _)| matched > most) {
            best = Some((matched, from));
            if matched == MATCH_MAX {
                break;
            }
        }
    }
    best.map_or(&[], |(_, from)| &history[from..(from + n).min(len)])
}

#[cfg(test)]
mod tests {
    use super::{Drafter, lookup};

    #[test]
    fn lookup_continues_the_latest_earlier_occurrence_of_the_last_tokens() {
        let history = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 2, 3];
        assert_eq!(lookup(&history, 3), &[7, 8, 2], "the latest match wins");
        assert_eq!(lookup(&history, 1), &[7]);
        assert_eq!(lookup(&[1, 2, 3, 4], 4), &[] as &[u32], "nothing repeats");
        assert_eq!(lookup(&[5, 5, 5], 4), &[5], "an overlapping match");
        assert_eq!(lookup(&history, 0), &[] as &[u32]);
        assert_eq!(lookup(&[], 3), &[] as &[u32]);
    }

    #[test]
    fn lookup_prefers_the_occurrence_that_matches_the_most_last_tokens() {
        // `8 9 1 2` occurred at the start; a later `1 2` is followed by something else.
        let history = [8, 9, 1, 2, 3, 4, 7, 1, 2, 6, 5, 8, 9, 1, 2];
        assert_eq!(
            lookup(&history, 2),
            &[3, 4],
            "the longer match wins over the later"
        );
        let copied = [history.as_slice(), &[3, 4, 7, 1, 2]].concat();
        assert_eq!(
            lookup(&copied, 3),
            &[6, 5, 8],
            "a copy in progress continues along its source"
        );
    }

    #[test]
    fn rejected_guesses_make_the_drafter_wait_longer_each_time() {
        let mut drafter = Drafter::new(&[1, 2, 3, 1, 2], 8);
        let mut guess = Vec::new();
        drafter.draft(8, &mut guess);
        assert_eq!(guess, [3, 1, 2], "four tokens allowed, three exist");
        let mut waits = Vec::new();
        for _ in 0..4 {
            drafter.record(3, 0);
            let mut steps = 0;
            loop {
                guess.clear();
                drafter.draft(8, &mut guess);
                if !guess.is_empty() {
                    break;
                }
                steps += 1;
            }
            waits.push(steps);
        }
        assert_eq!(waits, [1, 3, 7, 15]);
        drafter.record(1, 1);
        guess.clear();
        drafter.draft(8, &mut guess);
        assert!(!guess.is_empty(), "an accepted guess ends the waiting");
    }

    #[test]
    fn the_guess_length_grows_with_full_acceptance_and_shrinks_with_partial() {
        let mut drafter = Drafter::new(&[], 8);
        assert_eq!(drafter.length, 4);
        drafter.record(4, 4);
        assert_eq!(drafter.length, 6);
        drafter.record(6, 6);
        drafter.record(8, 8);
        assert_eq!(drafter.length, 8, "never beyond draft_max");
        drafter.record(8, 2);
        assert_eq!(drafter.length, 3);
    }
}
