//! WordPiece as llama.cpp's `llm_tokenizer_wpm` runs it (BERT vocabularies,
//! `tokenizer.ggml.model = "bert"`).
//!
//! The text is NFD-normalised and lowercased (one code point for one, as llama.cpp's table),
//! split at whitespace; control characters, combining marks (so accents), U+0000 and U+FFFD
//! are dropped; punctuation, ASCII symbols and CJK ideographs each become a word of their own.
//! Each word, with `▁` in front (the vocabulary stores word starts that way and continuations
//! bare, not with `##`), is cut greedily from the left into the longest byte strings the
//! vocabulary holds; a word with a piece that matches nothing becomes `[UNK]` whole. Written
//! here rather than taken from the `tokenizers` crate, whose BERT normaliser splits and cleans
//! text differently.

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

use super::vocab::Vocab;

/// Appends the ids of `text` to `out`; `max_token_len` is the longest token's length in bytes.
pub(super) fn tokenize(vocab: &Vocab, max_token_len: usize, text: &str, out: &mut Vec<u32>) {
    for word in words(text) {
        let word = format!("\u{2581}{word}");
        let bytes = word.as_bytes();
        let start = out.len();
        let mut i = 0;
        while i < bytes.len() {
            let longest = (i + 1..=bytes.len().min(i + max_token_len))
                .rev()
                .find_map(|j| {
                    let piece = std::str::from_utf8(&bytes[i..j]).ok()?;
                    vocab.text_to_token(piece).map(|id| (j, id))
                });
            match longest {
                Some((j, id)) => {
                    out.push(id);
                    i = j;
                }
                None => {
                    out.truncate(start);
                    break;
                }
            }
        }
        if out.len() == start {
            out.extend(vocab.unk);
        }
    }
}

/// The words of `text` after llama.cpp's WordPiece preprocessing.
fn words(text: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    for (c, _) in text.nfd() {
        if is_whitespace(c) {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            continue;
        }
        if c == '\0' || c == '\u{FFFD}' || is_control(c) || c.is_mark() {
            continue;
        }
        let lower = lowercase(c);
        if c.is_punctuation() || (c < '\u{7F}' && c.is_symbol()) || is_chinese(c) {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            words.last_mut().expect("never empty").push(lower);
            words.push(String::new());
        } else {
            words.last_mut().expect("never empty").push(lower);
        }
    }
    if words.last().is_some_and(String::is_empty) {
        words.pop();
    }
    words
}

/// The lowercase of `c` when it is one code point (llama.cpp's table maps one to one).
fn lowercase(c: char) -> char {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// llama.cpp's whitespace set.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\u{9}'..='\u{D}' | ' ' | '\u{85}' | '\u{A0}' | '\u{1680}' | '\u{2000}'..='\u{200A}'
        | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}')
}

/// llama.cpp's control flag: the categories Cc, Cf and Co.
fn is_control(c: char) -> bool {
    c.is_other_control() || c.is_other_format() || c.is_other_private_use()
}

/// The CJK ideograph blocks BERT splits into single characters (llama.cpp's list).
fn is_chinese(c: char) -> bool {
    matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '\u{20000}'..='\u{2A6DF}'
        | '\u{2A700}'..='\u{2B73F}' | '\u{2B740}'..='\u{2B81F}' | '\u{2B920}'..='\u{2CEAF}'
        | '\u{F900}'..='\u{FAFF}' | '\u{2F800}'..='\u{2FA1F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_spaces_punctuation_and_ideographs_lowercased_without_accents() {
        assert_eq!(words("Hello, World!"), ["hello", ",", "world", "!"]);
        assert_eq!(words("  a\tb\n"), ["a", "b"]);
        assert_eq!(words("東京x"), ["東", "京", "x"]);
        assert_eq!(words("Café naïve"), ["cafe", "naive"]);
        assert_eq!(words("a\u{200B}b\u{0}c"), ["abc"]);
        assert_eq!(words("$5"), ["$", "5"]);
        assert!(words("").is_empty());
    }
}
