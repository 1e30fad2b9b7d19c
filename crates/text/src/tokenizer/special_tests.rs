//! The one-pass special-token matcher gives exactly what llama.cpp's token-by-token search
//! gives. The search is written out here as llama.cpp runs it (`tokenizer_st_partition`) and
//! serves as the oracle for random vocabularies and texts built to overlap.

use std::sync::atomic::AtomicBool;

use super::special::{ControlTokens, Fragment, SpecialMatcher};
use super::vocab::{TokenData, TokenType, special_tokens_by_length};

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// llama.cpp's partition: each special token in turn, over every fragment not yet claimed.
fn reference<'a>(
    tokens: &[TokenData],
    special: &[u32],
    text: &'a str,
    parse_special: bool,
) -> Vec<Fragment<'a>> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut fragments = vec![Fragment::Text(text)];
    for &id in special {
        let data = &tokens[id as usize];
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

/// A small deterministic generator (xorshift64*), so that failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn string(&mut self, alphabet: &[&str], max_len: usize) -> String {
        let len = self.below(max_len + 1);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

fn token(text: &str, ty: TokenType, lstrip: bool, rstrip: bool) -> TokenData {
    TokenData {
        text: text.to_owned(),
        score: 0.0,
        ty,
        lstrip,
        rstrip,
    }
}

/// Texts over few characters so that tokens overlap, nest and repeat.
const ALPHABET: &[&str] = &["a", "b", "<", ">", " ", "\n", "é"];

fn random_vocab(rng: &mut Rng) -> Vec<TokenData> {
    let mut tokens = vec![token("a", TokenType::Normal, false, false)];
    for _ in 0..1 + rng.below(12) {
        let text = rng.string(ALPHABET, 5);
        let ty = match rng.below(4) {
            0 => TokenType::UserDefined,
            1 => TokenType::Unknown,
            _ => TokenType::Control,
        };
        tokens.push(token(&text, ty, rng.below(4) == 0, rng.below(4) == 0));
    }
    tokens
}

fn check(tokens: &[TokenData], text: &str, parse_special: bool) {
    let special = special_tokens_by_length(tokens);
    let matcher = SpecialMatcher::new(tokens, &special).unwrap();
    let control = if parse_special {
        ControlTokens::Parsed
    } else {
        ControlTokens::Literal
    };
    let got = matcher.partition(text, control, None).unwrap();
    let want = reference(tokens, &special, text, parse_special);
    assert_eq!(
        got,
        want,
        "text {text:?} parse_special {parse_special} vocab {:?}",
        tokens
            .iter()
            .map(|t| (&t.text, t.ty, t.lstrip, t.rstrip))
            .collect::<Vec<_>>()
    );
}

#[test]
fn one_pass_matches_llama_cpp_token_by_token_search() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let tokens = random_vocab(&mut rng);
        for _ in 0..8 {
            let text = rng.string(ALPHABET, 24);
            check(&tokens, &text, true);
            check(&tokens, &text, false);
        }
    }
}

#[test]
fn longer_tokens_win_even_when_a_shorter_one_starts_first() {
    let tokens = vec![
        token("ab", TokenType::Control, false, false),
        token("bcd", TokenType::Control, false, false),
        token("  ", TokenType::UserDefined, false, false),
        token("   ", TokenType::UserDefined, false, false),
    ];
    for text in ["abcd", "xabcdab", "       ", "ab  bcd   ab", ""] {
        check(&tokens, text, true);
        check(&tokens, text, false);
    }
}

/// Control tokens are found outside the literal ranges only; a token that would reach into one
/// falls back to its shorter prefixes, and user-defined tokens match everywhere.
#[test]
fn literal_ranges_keep_control_tokens_as_text() {
    let tokens = vec![
        token("<t>", TokenType::Control, false, false),
        token("<t><t>", TokenType::Control, false, false),
        token("<u>", TokenType::UserDefined, false, false),
    ];
    let special = special_tokens_by_length(&tokens);
    let matcher = SpecialMatcher::new(&tokens, &special).unwrap();
    let text = "<t><t>x<t><u>y<t><t>";
    // Literal: "x<t><u>" and "y<t>" (bytes 6..13 and 13..17), two messages side by side.
    let literal = [6..13, 13..17];
    let got = matcher
        .partition(text, ControlTokens::OutsideOf(&literal), None)
        .unwrap();
    assert_eq!(
        got,
        vec![
            Fragment::Token(1),
            Fragment::Text("x<t>"),
            Fragment::Token(2),
            Fragment::Text("y<t>"),
            Fragment::Token(0),
        ]
    );
}

#[test]
fn a_raised_cancel_flag_stops_the_search() {
    let tokens = vec![token("<t>", TokenType::Control, false, false)];
    let special = special_tokens_by_length(&tokens);
    let matcher = SpecialMatcher::new(&tokens, &special).unwrap();
    let cancel = AtomicBool::new(true);
    assert!(
        matcher
            .partition("<t> and <t>", ControlTokens::Parsed, Some(&cancel))
            .is_err()
    );
}
