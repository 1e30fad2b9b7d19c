//! Splitting raw text around special tokens before the tokenizer model sees it
//! (llama.cpp's `tokenizer_st_partition`).
//!
//! Special tokens are searched one at a time, longest text first, each over every piece of text
//! not yet claimed. This is not the leftmost-longest scan of the `tokenizers` crate's added
//! vocabulary; the two disagree on overlapping tokens (gemma3's whitespace runs), so llama.cpp's
//! order is kept. User-defined tokens are always matched; control and unknown tokens only when
//! the caller asks to parse special tokens.

use super::vocab::{TokenType, Vocab};

/// A piece of the input: raw text still to tokenize, or a token already decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Text for the tokenizer model.
    Text(&'a str),
    /// A special token found in the text.
    Token(u32),
}

/// Whitespace as C's `isspace` sees it (ASCII only).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits `text` into fragments around the special tokens of `vocab`.
pub(crate) fn partition<'a>(
    vocab: &Vocab,
    text: &'a str,
    parse_special: bool,
) -> Vec<Fragment<'a>> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut fragments = vec![Fragment::Text(text)];
    for &id in &vocab.special_tokens {
        let data = &vocab.tokens[id as usize];
        if !parse_special && matches!(data.ty, TokenType::Control | TokenType::Unknown) {
            continue;
        }
        let needle = data.text.as_str();
        if needle.is_empty() {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len());
        for fragment in fragments {
            let Fragment::Text(mut rest) = fragment else {
                next.push(fragment);
                continue;
            };
            while let Some(pos) = rest.find(needle) {
                let mut left = &rest[..pos];
                if data.lstrip {
                    left = left.trim_end_matches(|c: char| c.is_ascii() && is_space(c as u8));
                }
                if !left.is_empty() {
                    next.push(Fragment::Text(left));
                }
                next.push(Fragment::Token(id));
                rest = &rest[pos + needle.len()..];
                if data.rstrip {
                    rest = rest.trim_start_matches(|c: char| c.is_ascii() && is_space(c as u8));
                }
            }
            if !rest.is_empty() {
                next.push(Fragment::Text(rest));
            }
        }
        fragments = next;
    }
    fragments
}
