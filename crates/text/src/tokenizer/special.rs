//! Splitting raw text around special tokens before the tokenizer model sees it, with the result
//! of llama.cpp's `tokenizer_st_partition`.
//!
//! llama.cpp searches the special tokens one at a time, longest text first (ties in id order),
//! each over every piece of text not yet claimed; a token takes its leftmost non-overlapping
//! occurrences. This is not the leftmost-longest scan of the `tokenizers` crate's added
//! vocabulary; the two disagree on overlapping tokens (gemma3's whitespace runs), so llama.cpp's
//! order is kept. User-defined tokens are always matched; control and unknown tokens only where
//! the caller allows them.
//!
//! Trying thousands of tokens one after the other costs a pass over the text per token (Gemma 3
//! has 6 415 of them: seconds for a few megabytes). The same result comes from one pass of an
//! Aho-Corasick automaton instead: it finds, at each position, the longest special token that
//! starts there; every shorter one that starts there is a prefix of it, reachable through
//! [`SpecialMatcher::parent`]. Positions are then handed from each token to its next-shorter
//! prefix in llama.cpp's priority order, and a token takes a position when the span it would
//! cover is still free. Each position is visited at most once per token that matches there.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};

use super::TokenizerError;
use super::token::{TokenData, TokenType};

/// A piece of the input: raw text still to tokenize, or a token already decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Text for the tokenizer model.
    Text(&'a str),
    /// A special token found in the text.
    Token(u32),
}

/// The caller's cancel flag was raised while the text was being split.
#[derive(Debug)]
pub(crate) struct Cancelled;

/// How often (in text positions) the scan looks at the cancel flag.
const CANCEL_CHECK_EVERY: usize = 1 << 16;

/// "No pattern" in the per-pattern link tables.
const NONE: u32 = u32::MAX;

/// Whitespace as C's `isspace` sees it (ASCII only).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Where control tokens may be matched.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ControlTokens<'r> {
    /// Anywhere (`parse_special`).
    Parsed,
    /// Nowhere: control and unknown tokens are plain text.
    Literal,
    /// Anywhere except in these byte ranges (sorted, not overlapping): the text of chat messages
    /// inside a rendered template. A control token is taken only when all of it lies outside.
    OutsideOf(&'r [Range<usize>]),
}

impl ControlTokens<'_> {
    /// The end of the stretch that starts at `pos` and may hold control tokens (`pos` itself when
    /// none may start there).
    fn limit(&self, pos: usize, len: usize) -> usize {
        match self {
            ControlTokens::Parsed => len,
            ControlTokens::Literal => pos,
            ControlTokens::OutsideOf(ranges) => {
                let next = ranges.partition_point(|r| r.end <= pos);
                match ranges.get(next) {
                    Some(r) if r.start <= pos => pos,
                    Some(r) => r.start,
                    None => len,
                }
            }
        }
    }
}

/// One special token, by its rank in llama.cpp's priority order.
#[derive(Clone, Debug)]
struct Ranked {
    id: u32,
    /// The pattern (distinct text) it is written as.
    pattern: u32,
    /// Matched even where control tokens are not (a user-defined token).
    always: bool,
    /// Strips the whitespace to its left / right when matched.
    lstrip: bool,
    rstrip: bool,
}

/// The special tokens of a vocabulary, ready to be found in text in one pass.
#[derive(Clone, Debug)]
pub(crate) struct SpecialMatcher {
    /// Matches every distinct special-token text, anchored, longest first. `None` for a
    /// vocabulary without special tokens.
    automaton: Option<AhoCorasick>,
    /// The tokens in priority order (longest text first, ties in id order); empty texts left out.
    ranked: Vec<Ranked>,
    /// Per pattern: its length in bytes.
    lens: Vec<usize>,
    /// Per pattern: the ranks of the tokens written as it, ascending (a text can be listed
    /// twice, with different types).
    members: Vec<Vec<u32>>,
    /// Per pattern: the longest other pattern that is a proper prefix of it, or [`NONE`].
    parent: Vec<u32>,
    /// Which bytes can start a pattern.
    first_bytes: [bool; 256],
}

impl SpecialMatcher {
    /// Indexes `special`: the control, user-defined and unknown ids of `tokens`, longest text
    /// first, ties in id order.
    pub(crate) fn new(tokens: &[TokenData], special: &[u32]) -> Result<Self, TokenizerError> {
        let mut ranked = Vec::new();
        let mut texts: Vec<&str> = Vec::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        let mut pattern_of = std::collections::HashMap::new();
        for &id in special {
            let data = &tokens[id as usize];
            let text = data.text.as_str();
            if text.is_empty() {
                continue;
            }
            let pattern = *pattern_of.entry(text).or_insert_with(|| {
                texts.push(text);
                members.push(Vec::new());
                texts.len() as u32 - 1
            });
            members[pattern as usize].push(ranked.len() as u32);
            ranked.push(Ranked {
                id,
                pattern,
                always: data.ty == TokenType::UserDefined,
                lstrip: data.lstrip,
                rstrip: data.rstrip,
            });
        }
        let parent = texts
            .iter()
            .map(|text| {
                (1..text.len())
                    .rev()
                    .filter(|&k| text.is_char_boundary(k))
                    .find_map(|k| pattern_of.get(&text[..k]).copied())
                    .unwrap_or(NONE)
            })
            .collect();
        let mut first_bytes = [false; 256];
        for text in &texts {
            first_bytes[usize::from(text.as_bytes()[0])] = true;
        }
        let automaton = if texts.is_empty() {
            None
        } else {
            let built = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .start_kind(StartKind::Anchored)
                .build(&texts)
                .map_err(|e| {
                    TokenizerError::Invalid(format!("the special tokens cannot be indexed: {e}"))
                })?;
            Some(built)
        };
        Ok(SpecialMatcher {
            automaton,
            ranked,
            lens: texts.iter().map(|t| t.len()).collect(),
            members,
            parent,
            first_bytes,
        })
    }

    /// The first token (by rank) allowed at `pos` among pattern `p` and its shorter prefixes:
    /// user-defined tokens anywhere, control tokens only when they end by `limit`.
    fn allowed_from(&self, mut p: u32, pos: usize, limit: usize) -> Option<u32> {
        while p != NONE {
            let fits = pos + self.lens[p as usize] <= limit;
            let allowed = self.members[p as usize]
                .iter()
                .find(|&&r| fits || self.ranked[r as usize].always);
            if let Some(&rank) = allowed {
                return Some(rank);
            }
            p = self.parent[p as usize];
        }
        None
    }

    /// Splits `text` into fragments around its special tokens. `cancel`, when raised, stops the
    /// work early.
    pub(crate) fn partition<'a>(
        &self,
        text: &'a str,
        control: ControlTokens<'_>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Fragment<'a>>, Cancelled> {
        let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
        let n = text.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let Some(automaton) = &self.automaton else {
            return Ok(vec![Fragment::Text(text)]);
        };
        let bytes = text.as_bytes();

        // Candidate positions of each pattern, in priority order: at first, each position under
        // the longest allowed pattern that starts there.
        let mut candidates: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (pos, &byte) in bytes.iter().enumerate() {
            if pos % CANCEL_CHECK_EVERY == 0 && cancelled() {
                return Err(Cancelled);
            }
            if !self.first_bytes[usize::from(byte)] {
                continue;
            }
            let input = Input::new(text).range(pos..).anchored(Anchored::Yes);
            let Ok(Some(m)) = automaton.try_find(input) else {
                continue;
            };
            let limit = control.limit(pos, n);
            if let Some(p) = self.allowed_from(m.pattern().as_u32(), pos, limit) {
                candidates.entry(p).or_default().push(pos);
            }
        }
        if candidates.is_empty() {
            return Ok(vec![Fragment::Text(text)]);
        }

        // Take spans in priority order; a position a token cannot take goes to its next prefix.
        let mut claimed = vec![false; n];
        let mut taken: Vec<(usize, u32)> = Vec::new();
        while let Some((rank, mut positions)) = candidates.pop_first() {
            if cancelled() {
                return Err(Cancelled);
            }
            positions.sort_unstable();
            let token = &self.ranked[rank as usize];
            let len = self.lens[token.pattern as usize];
            for pos in positions {
                if claimed[pos] {
                    continue;
                }
                if claimed[pos..pos + len].contains(&true) {
                    let limit = control.limit(pos, n);
                    let parent = self.parent[token.pattern as usize];
                    if let Some(next) = self.allowed_from(parent, pos, limit) {
                        candidates.entry(next).or_default().push(pos);
                    }
                    continue;
                }
                claimed[pos..pos + len].fill(true);
                taken.push((pos, rank));
                if token.lstrip {
                    let mut j = pos;
                    while j > 0 && !claimed[j - 1] && is_space(bytes[j - 1]) {
                        j -= 1;
                        claimed[j] = true;
                    }
                }
                if token.rstrip {
                    let mut j = pos + len;
                    while j < n && !claimed[j] && is_space(bytes[j]) {
                        claimed[j] = true;
                        j += 1;
                    }
                }
            }
        }

        // Tokens in text order, with the unclaimed text between them.
        taken.sort_unstable();
        let mut fragments = Vec::with_capacity(2 * taken.len() + 1);
        let push_free = |fragments: &mut Vec<Fragment<'a>>, range: Range<usize>| {
            let mut start = None;
            for pos in range.clone() {
                match (claimed[pos], start) {
                    (false, None) => start = Some(pos),
                    (true, Some(s)) => {
                        fragments.push(Fragment::Text(&text[s..pos]));
                        start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = start {
                fragments.push(Fragment::Text(&text[s..range.end]));
            }
        };
        let mut cursor = 0;
        for (pos, rank) in taken {
            let token = &self.ranked[rank as usize];
            push_free(&mut fragments, cursor..pos);
            fragments.push(Fragment::Token(token.id));
            cursor = pos + self.lens[token.pattern as usize];
        }
        push_free(&mut fragments, cursor..n);
        Ok(fragments)
    }
}
