//! llama.cpp's SentencePiece (`tokenizer.ggml.model = "llama"`) tokenizer.
//!
//! This is written out rather than taken from the `tokenizers` crate because llama.cpp does not
//! run SentencePiece's unigram Viterbi search: it starts from single characters and repeatedly
//! merges the adjacent pair whose concatenation is the vocabulary token with the highest score
//! (ties: leftmost pair first), then turns every leftover character that is not a token into
//! `<0xAB>` byte tokens. A unigram model (what `tokenizers` offers for these vocabularies) finds
//! the best-scoring segmentation instead, which differs on real text. Exactness against
//! llama.cpp is the requirement, so this follows `llm_tokenizer_spm_session` step by step.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

/// A run of text in the linked list of symbols; `len == 0` once merged into its left neighbour.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of two adjacent symbols.
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    /// Byte length of the merged text; a stale candidate no longer adds up to it.
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Highest score first; among equal scores, the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Tokenizes one fragment of raw text (already space-escaped with `▁`) and appends the ids.
pub(crate) fn tokenize(vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
    if text.is_empty() {
        return;
    }
    let mut symbols: Vec<Symbol> = Vec::new();
    for (i, (start, ch)) in text.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: ch.len_utf8(),
            prev: i.checked_sub(1),
            next: None,
        });
        if i > 0 {
            symbols[i - 1].next = Some(i);
        }
    }

    let mut queue = BinaryHeap::new();
    let try_add =
        |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize, right: usize| {
            let (l, r) = (symbols[left], symbols[right]);
            let merged = &text[l.start..r.start + r.len];
            if let Some(id) = vocab.text_to_token(merged) {
                queue.push(Bigram {
                    left,
                    right,
                    score: vocab.tokens[id as usize].score,
                    size: merged.len(),
                });
            }
        };
    for i in 1..symbols.len() {
        try_add(&mut queue, &symbols, i - 1, i);
    }

    while let Some(b) = queue.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        symbols[b.left].len += r.len;
        symbols[b.right].len = 0;
        symbols[b.left].next = r.next;
        if let Some(n) = r.next {
            symbols[n].prev = Some(b.left);
        }
        if let Some(p) = symbols[b.left].prev {
            try_add(&mut queue, &symbols, p, b.left);
        }
        if let Some(n) = symbols[b.left].next {
            try_add(&mut queue, &symbols, b.left, n);
        }
    }

    // Every surviving symbol is either a token or a single character that is not one; the
    // latter falls back to one token per UTF-8 byte.
    let mut i = Some(0);
    while let Some(k) = i {
        let s = symbols[k];
        let piece = &text[s.start..s.start + s.len];
        match vocab.text_to_token(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(|b| vocab.byte_to_token(b))),
        }
        i = s.next;
    }
}
