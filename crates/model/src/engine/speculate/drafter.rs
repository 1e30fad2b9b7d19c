//! One sequence's prompt-lookup guesser. It follows a source: a position in the prompt or the
//! output whose tokens the sequence has been repeating. While the tokens keep coming as the
//! source predicts, the source advances with them and the guesses continue from it, with no
//! search. When a token differs (an edit: a renamed identifier, a changed value), the drafter
//! remembers where the source diverged and looks for where it continues:
//!
//! - right after the divergence, a token of the source replaced by another (a substitution)
//!   predicts the source one position on;
//! - later, tokens were inserted or dropped, and the source continues just after an occurrence
//!   of the last token within a short window after the divergence (the occurrence that repeats
//!   the most last tokens, the nearest of those);
//! - anywhere in the history, the earlier occurrence that repeats the most last tokens (at least
//!   two) competes with the place near the divergence, which wins unless the other repeats
//!   clearly more (the inserted text may itself be copied, say from an instruction).
//!
//! When the text confirms where the source continues after a divergence, the drafter learns
//! the edit (`edits`): from then on, where the source has the tokens the text replaced, it
//! guesses the text's replacement, so that a rename or a replaced word costs a rejected guess
//! once, not at every occurrence.
//!
//! Without a divergence to go back to, the drafter takes the longest match of the whole
//! history. The number of tokens guessed follows the acceptance: more after a fully accepted
//! guess, `accepted + 1` after a partial one, half after a rejected one; a searched guess is at
//! least as long as its match, and one from a place near a divergence at most four tokens. A
//! guess from a search of the whole history that is rejected entirely makes the drafter wait
//! 1, 3, 7 … steps before guessing again, so that free text, where such matches rarely hold,
//! runs as plain decoding; guesses that follow a source or its divergence never wait.

use super::edits::{Cursor, Edits};
use super::lookup::{self, Match};

/// How far after a divergence (in positions of the history) the continuation is looked for.
const WINDOW: usize = 32;
/// How many tokens after a divergence the drafter keeps looking near it.
const SPAN: usize = 32;
/// How many more last tokens a match anywhere must repeat to win over the place near a
/// divergence.
const NEAR_BONUS: usize = 2;
/// The most tokens guessed from a place found near a divergence, before one held.
const REANCHORED_MAX: usize = 4;
/// The longest wait, in steps, after guesses that were all rejected.
const MAX_WAIT: u32 = 31;

/// Where in the text being followed the next token is guessed from.
#[derive(Clone, Copy, Debug)]
struct Source {
    cursor: Cursor,
    /// Tokens that came as it predicted since it was chosen.
    held: usize,
    /// How it was found.
    origin: Origin,
}

/// Where a followed source stopped predicting.
#[derive(Clone, Copy, Debug)]
struct Divergence {
    /// The position whose token was predicted and did not come.
    at: usize,
    /// Tokens produced since, the one that differed first.
    since: usize,
    /// The history position of the token that differed.
    out_at: usize,
}

/// Where the current guess came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// The source being followed, or the place near its divergence.
    Source,
    /// A search of the whole history.
    Search,
}

/// One sequence's guesser: its tokens so far, the source it follows and its adaptive guess
/// length.
pub(in crate::engine) struct Drafter {
    /// The prompt and the generated tokens.
    history: Vec<u32>,
    draft_max: usize,
    /// How many tokens the next guess may have.
    length: usize,
    /// Searched guesses in a row that were all rejected.
    misses: u32,
    /// Steps left before the next searched guess.
    wait: u32,
    source: Option<Source>,
    divergence: Option<Divergence>,
    /// Where the last guess came from.
    origin: Origin,
    /// The edits the text has made to its sources.
    edits: Edits,
    /// The edit (old and new tokens) that a source found after a divergence implies, learned
    /// when the text confirms the source.
    implied: Option<(Vec<u32>, Vec<u32>)>,
}

impl Drafter {
    /// A guesser over `prompt` guessing at most `draft_max` tokens (none when 0).
    pub(in crate::engine) fn new(prompt: &[u32], draft_max: usize) -> Self {
        Self {
            history: prompt.to_vec(),
            draft_max,
            length: draft_max.min(4),
            misses: 0,
            wait: 0,
            source: None,
            divergence: None,
            origin: Origin::Search,
            edits: Edits::default(),
            implied: None,
        }
    }

    /// Records a token the sequence produced, advancing the source when it predicted it.
    pub(in crate::engine) fn push(&mut self, token: u32) {
        let implied = self.implied.take();
        if let Some(source) = self.source.take() {
            let cursor = source.cursor;
            let followed = if self.edits.expected(&self.history, cursor) == Some(token) {
                let next = self.edits.advance(&self.history, cursor);
                if let (0, Some((old, new))) = (source.held, implied) {
                    self.edits.learn(&old, &new);
                }
                Some(next)
            } else {
                self.edits.kept(&self.history, cursor, token)
            };
            if let Some(cursor) = followed {
                self.source = Some(Source {
                    cursor,
                    held: source.held + 1,
                    ..source
                });
            } else if source.held > 0
                && (source.origin == Origin::Source || self.divergence.is_none())
            {
                // A source that never held was a wrong guess, not a text that changed; one
                // found elsewhere while the text it left was still near was a detour through
                // copied text, after which that text goes on.
                self.divergence = Some(Divergence {
                    at: cursor.next,
                    since: 0,
                    out_at: self.history.len(),
                });
            }
        }
        if let Some(divergence) = &mut self.divergence {
            divergence.since += 1;
            if divergence.since > SPAN {
                self.divergence = None;
            }
        }
        self.history.push(token);
    }

    /// The prompt and the generated tokens.
    pub(in crate::engine) fn history(&self) -> &[u32] {
        &self.history
    }

    /// How many tokens to guess this step, at most `limit` (0 while waiting); each call is a
    /// step.
    pub(in crate::engine) fn budget(&mut self, limit: usize) -> usize {
        if self.wait > 0 {
            self.wait -= 1;
            return 0;
        }
        limit.min(self.length)
    }

    /// Appends to `out` up to `limit` guessed tokens to follow the history by prompt lookup
    /// (none while waiting or when nothing matches).
    pub(in crate::engine) fn draft(&mut self, limit: usize, out: &mut Vec<u32>) {
        if limit == 0 {
            // Still a step: it counts towards the wait.
            self.budget(0);
            return;
        }
        let Some((from, origin, evidence)) = self.locate() else {
            return;
        };
        let n = match origin {
            Origin::Source => limit.min(self.length),
            Origin::Search => self.budget(limit),
        };
        if n == 0 {
            return;
        }
        // A search's long match predicts a long continuation; a place found near a divergence
        // is a guess until a token confirms it.
        let n = match origin {
            Origin::Source if self.source.is_none() => n.min(REANCHORED_MAX),
            Origin::Source => n,
            Origin::Search => limit.min(n.max(evidence)),
        };
        self.origin = origin;
        if self.source.is_none() {
            self.implied = match origin {
                Origin::Source => self.edit_to(from, evidence),
                Origin::Search => None,
            };
        }
        let mut cursor = self
            .source
            .get_or_insert(Source {
                cursor: Cursor::at(from),
                held: 0,
                origin,
            })
            .cursor;
        for _ in 0..n {
            let Some(token) = self.edits.expected(&self.history, cursor) else {
                break;
            };
            out.push(token);
            cursor = self.edits.advance(&self.history, cursor);
        }
    }

    /// The edit that following the source from `from`, where it repeats the history's last
    /// `matched` tokens, implies: the source's tokens from the divergence to that match, and
    /// the history's from the token that differed to those last ones (`None` where the match
    /// reaches back over either).
    fn edit_to(&self, from: usize, matched: usize) -> Option<(Vec<u32>, Vec<u32>)> {
        let d = self.divergence?;
        let old_end = from.checked_sub(matched)?;
        let new_end = self.history.len().checked_sub(matched)?;
        (old_end > d.at && new_end > d.out_at).then(|| {
            (
                self.history[d.at..old_end].to_vec(),
                self.history[d.out_at..new_end].to_vec(),
            )
        })
    }

    /// Where the next guess starts, where it came from and how many tokens it has repeated (the
    /// source's since it was chosen, else the match's): the source, else the best of the place
    /// near its divergence and a search of the whole history.
    fn locate(&self) -> Option<(usize, Origin, usize)> {
        if let Some(source) = self.source {
            return Some((source.cursor.next, Origin::Source, source.held));
        }
        let near = self.divergence.and_then(|d| {
            let found = lookup::match_near(&self.history, d.at, WINDOW);
            let substitution = Match {
                from: d.at + 1,
                len: 0,
            };
            match found {
                Some(m) if m.len >= 2 => Some(m),
                _ if d.since == 1 && substitution.from < self.history.len() => Some(substitution),
                found => found,
            }
        });
        let searched = lookup::longest_match(&self.history);
        match (near, searched) {
            (Some(n), Some(s)) if s.len > n.len + NEAR_BONUS => {
                Some((s.from, Origin::Search, s.len))
            }
            (Some(n), _) => Some((n.from, Origin::Source, n.len)),
            (None, s) => s.map(|s| (s.from, Origin::Search, s.len)),
        }
    }

    /// Adapts the guess length to a verification of `drafted` guesses of which `accepted`
    /// held.
    pub(in crate::engine) fn record(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        if accepted == 0 {
            self.length = (self.length / 2).max(1);
            if self.origin == Origin::Search {
                self.misses += 1;
                self.wait = (1u32 << self.misses.min(5)).saturating_sub(1).min(MAX_WAIT);
            }
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

#[cfg(test)]
mod tests {
    use super::Drafter;

    /// One decoding step of a simulated sequence: the tokens guessed and how many held.
    #[derive(Debug, PartialEq, Eq)]
    struct Step {
        guess: Vec<u32>,
        accepted: usize,
    }

    /// The steps a sequence with `prompt` takes to produce `output` while guessing at most
    /// `draft_max` tokens, verified as the engine does: the guesses that match the output
    /// are kept, and the draw after them is a token of its own (the first token comes from
    /// the prompt's pass).
    fn simulate(prompt: &[u32], output: &[u32], draft_max: usize) -> Vec<Step> {
        let mut drafter = Drafter::new(prompt, draft_max);
        let mut steps = Vec::new();
        let mut done = 1;
        drafter.push(output[0]);
        while done < output.len() {
            // The step's feed begins with the last token, as the engine's does.
            let mut feed = vec![output[done - 1]];
            drafter.draft(draft_max.min(output.len() - done - 1), &mut feed);
            let guess = feed.split_off(1);
            let accepted = guess
                .iter()
                .zip(&output[done..])
                .take_while(|(g, t)| g == t)
                .count();
            for &token in &output[done..done + accepted + 1] {
                drafter.push(token);
            }
            done += accepted + 1;
            drafter.record(guess.len(), accepted);
            steps.push(Step { guess, accepted });
        }
        steps
    }

    /// The guess made in the step that followed the output's `position`-th token.
    fn guess_after(steps: &[Step], position: usize) -> &[u32] {
        let mut done = 1;
        for step in steps {
            if done == position + 1 {
                return &step.guess;
            }
            done += step.accepted + 1;
        }
        panic!("no step began after token {position}")
    }

    /// A prompt that holds a text of 60 distinct tokens, and that text.
    fn source() -> (Vec<u32>, Vec<u32>) {
        let text: Vec<u32> = (100..160).collect();
        ([&[1, 2][..], &text, &[3]].concat(), text)
    }

    #[test]
    fn a_copy_follows_its_source_with_ever_longer_guesses() {
        let (prompt, text) = source();
        let steps = simulate(&prompt, &text, 8);
        let lengths: Vec<usize> = steps.iter().map(|s| s.guess.len()).collect();
        // One token matches nothing yet; the last guess stops at the output's end.
        assert_eq!(lengths, [0, 4, 6, 8, 8, 8, 8, 8, 0]);
        assert!(steps.iter().all(|s| s.accepted == s.guess.len()));
    }

    #[test]
    fn after_a_substituted_token_the_guess_skips_the_token_it_replaced() {
        let (prompt, text) = source();
        let mut edited = text.clone();
        edited[12] = 7;
        let steps = simulate(&prompt, &edited, 8);
        assert!(guess_after(&steps, 12).starts_with(&text[13..16]));
        let rejected: usize = steps.iter().map(|s| s.guess.len() - s.accepted).sum();
        assert_eq!(
            rejected, 1,
            "only the replaced token was guessed wrong: {steps:?}"
        );
    }

    #[test]
    fn after_inserted_tokens_the_source_continues_where_its_next_token_comes() {
        let (prompt, text) = source();
        let edited = [&text[..12], &[7, 8, 9], &text[12..]].concat();
        let steps = simulate(&prompt, &edited, 8);
        assert!(
            guess_after(&steps, 15).starts_with(&text[13..16]),
            "the token after the insertion is the source's next one: {steps:?}"
        );
    }

    #[test]
    fn after_dropped_tokens_the_source_continues_after_the_token_that_came() {
        let (prompt, text) = source();
        let edited = [&text[..12], &text[15..]].concat();
        let steps = simulate(&prompt, &edited, 8);
        // The first token after the gap is taken for a substitution; two pin the source down.
        assert!(
            guess_after(&steps, 13).starts_with(&text[17..20]),
            "{steps:?}"
        );
    }

    #[test]
    fn an_inserted_text_copied_from_elsewhere_is_followed_there() {
        // The prompt names the new text (`7 8 9 10 11`) after the source, out of the window.
        let (prompt, text) = source();
        let prompt = [&prompt[..], &[20, 7, 8, 9, 10, 11, 21]].concat();
        let edited = [&text[..12], &[7, 8, 9, 10, 11], &text[12..]].concat();
        let steps = simulate(&prompt, &edited, 8);
        assert_eq!(guess_after(&steps, 13), &[9, 10, 11], "copied: {steps:?}");
        assert!(
            guess_after(&steps, 17).starts_with(&text[13..16]),
            "back to the source: {steps:?}"
        );
    }

    /// How many of the steps' guesses were not all accepted.
    fn rejected_guesses(steps: &[Step]) -> usize {
        steps.iter().filter(|s| s.accepted < s.guess.len()).count()
    }

    /// A text of distinct tokens in which `old` follows the `at[k]`-th of them, and the
    /// same text with the first `renamed` of those occurrences replaced by `new`.
    fn renamed(at: &[usize], old: &[u32], new: &[u32], renamed: usize) -> (Vec<u32>, Vec<u32>) {
        let (mut text, mut edited) = (Vec::new(), Vec::new());
        let mut filler = 100..;
        let mut start = 0;
        for (k, &a) in at.iter().enumerate() {
            let run: Vec<u32> = filler.by_ref().take(a - start).collect();
            text.extend_from_slice(&run);
            edited.extend_from_slice(&run);
            text.extend_from_slice(old);
            edited.extend_from_slice(if k < renamed { new } else { old });
            start = a;
        }
        let tail: Vec<u32> = filler.take(12).collect();
        text.extend_from_slice(&tail);
        edited.extend_from_slice(&tail);
        (text, edited)
    }

    #[test]
    fn a_repeated_rename_is_guessed_from_its_second_occurrence_on() {
        let at = [10, 22, 35, 47, 60];
        let (text, edited) = renamed(&at, &[7, 8], &[20, 21, 22], at.len());
        let prompt = [&[1, 2][..], &text, &[3]].concat();
        let steps = simulate(&prompt, &edited, 8);
        // Every rejection comes before the second occurrence (at `at[1]` plus the first's
        // three tokens).
        let mut done = 1;
        for step in &steps {
            if step.accepted < step.guess.len() {
                assert!(done + step.accepted < at[1] + 3, "{steps:?}");
            }
            done += step.accepted + 1;
        }
        // The later occurrences come inside guesses.
        let guessed = steps
            .iter()
            .filter(|s| {
                s.accepted == s.guess.len() && s.guess.windows(3).any(|w| w == [20, 21, 22])
            })
            .count();
        assert!(guessed >= 3, "{steps:?}");
    }

    #[test]
    fn a_replaced_token_is_guessed_again_until_the_text_keeps_the_source() {
        // Replaced at all four occurrences, the first alone is guessed wrong; replaced at the
        // first two, the third (kept as it was) costs one more guess, which forgets the edit.
        for (renamed_count, rejected) in [(4, 1), (2, 2)] {
            let (text, edited) = renamed(&[10, 20, 30, 40], &[7], &[9], renamed_count);
            let prompt = [&[1, 2][..], &text, &[3]].concat();
            let steps = simulate(&prompt, &edited, 8);
            assert_eq!(rejected_guesses(&steps), rejected, "{steps:?}");
        }
    }

    #[test]
    fn text_that_repeats_nothing_is_never_guessed() {
        let prompt: Vec<u32> = (0..30).collect();
        let output: Vec<u32> = (100..160).collect();
        assert!(
            simulate(&prompt, &output, 8)
                .iter()
                .all(|s| s.guess.is_empty())
        );
    }

    #[test]
    fn rejected_searched_guesses_make_the_drafter_wait_longer_each_time() {
        let mut drafter = Drafter::new(&[], 8);
        let mut waits = Vec::new();
        for _ in 0..4 {
            drafter.record(3, 0);
            let mut steps = 0;
            while drafter.budget(8) == 0 {
                steps += 1;
            }
            waits.push(steps);
        }
        assert_eq!(waits, [1, 3, 7, 15]);
        drafter.record(1, 1);
        assert!(drafter.budget(8) > 0, "an accepted guess ends the waiting");
    }

    #[test]
    fn free_text_with_chance_repeats_wastes_few_guesses() {
        // `1 2` keeps coming back, followed by something new each time.
        let output: Vec<u32> = (0..60).flat_map(|i| [1, 2, 100 + i]).collect();
        let steps = simulate(&[5, 6], &output, 8);
        let drafted: usize = steps.iter().map(|s| s.guess.len()).sum();
        assert!(drafted <= 30, "{drafted} guesses in {} steps", steps.len());
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
        drafter.record(3, 0);
        assert_eq!(drafter.length, 1);
    }
}
