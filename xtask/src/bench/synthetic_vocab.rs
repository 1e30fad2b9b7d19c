//! A synthetic Llama SentencePiece vocabulary, shaped like the real one so that both rinfer and
//! llama.cpp tokenize with it: `<unk>`, `<s>`, `</s>`, the 256 byte tokens `<0x00>`..`<0xFF>`,
//! then single characters and ever longer letter pieces, each reachable by merging two shorter
//! ones, scored so that earlier (shorter) pieces merge first.
//!
//! Encoders get a real WordPiece vocabulary instead, copied whole from a GGUF's `tokenizer.*`
//! metadata: bge's and nomic's 30,522 tokens (bert-base-uncased's) are llama.cpp's
//! `models/ggml-vocab-bert-bge.gguf`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use rinfer_formats::gguf::{GgufFile, MetadataValue, ValueType};

/// llama.cpp's `llama_token_type` values used here.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const BYTE: i32 = 6;

/// SentencePiece's word-boundary marker, standing for a space.
const SPACE: char = '\u{2581}';

/// The `tokenizer.ggml.*` metadata of a vocabulary of `size` tokens (at least 259 + 75).
pub fn metadata(size: usize) -> Vec<(&'static str, MetadataValue)> {
    let (tokens, scores, types) = pieces(size);
    let array = |element, items| MetadataValue::Array { element, items };
    vec![
        (
            "tokenizer.ggml.model",
            MetadataValue::String("llama".into()),
        ),
        (
            "tokenizer.ggml.pre",
            MetadataValue::String("default".into()),
        ),
        (
            "tokenizer.ggml.tokens",
            array(
                ValueType::String,
                tokens.into_iter().map(MetadataValue::String).collect(),
            ),
        ),
        (
            "tokenizer.ggml.scores",
            array(
                ValueType::F32,
                scores.into_iter().map(MetadataValue::F32).collect(),
            ),
        ),
        (
            "tokenizer.ggml.token_type",
            array(
                ValueType::I32,
                types.into_iter().map(MetadataValue::I32).collect(),
            ),
        ),
        ("tokenizer.ggml.unknown_token_id", MetadataValue::U32(0)),
        ("tokenizer.ggml.bos_token_id", MetadataValue::U32(1)),
        ("tokenizer.ggml.eos_token_id", MetadataValue::U32(2)),
        ("tokenizer.ggml.add_bos_token", MetadataValue::Bool(true)),
        ("tokenizer.ggml.add_eos_token", MetadataValue::Bool(false)),
    ]
}

/// llama.cpp's bert-bge WordPiece vocabulary, in its source tree under the bench cache
/// (fetched first if missing).
pub fn bge_vocabulary() -> Result<PathBuf> {
    let source = super::llama_cpp::source(&super::cache::root()?)?;
    Ok(source.join("models/ggml-vocab-bert-bge.gguf"))
}

/// The `tokenizer.*` metadata of the GGUF at `path`, checked to hold `size` tokens.
pub fn wordpiece_metadata(path: &Path, size: usize) -> Result<Vec<(String, MetadataValue)>> {
    let file = GgufFile::open(path)
        .with_context(|| format!("cannot read the vocabulary {}", path.display()))?;
    let metadata = file.metadata();
    let tokens = metadata.get_array("tokenizer.ggml.tokens")?.len();
    ensure!(
        tokens == size,
        "{} holds {tokens} tokens, the model {size}",
        path.display()
    );
    Ok(metadata
        .iter()
        .filter(|(key, _)| key.starts_with("tokenizer."))
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect())
}

/// Token texts, scores and types, `size` of each.
fn pieces(size: usize) -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![UNKNOWN, CONTROL, CONTROL];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([BYTE; 256]);
    let lower: Vec<char> = ('a'..='z').collect();
    let singles = std::iter::once(SPACE)
        .chain(lower.iter().copied())
        .chain('A'..='Z')
        .chain('0'..='9')
        .chain(".,;:!?'\"-()".chars())
        .map(String::from);
    let spaced_letters = lower
        .iter()
        .copied()
        .chain('A'..='Z')
        .map(|c| format!("{SPACE}{c}"));
    let words = |len: u32| {
        let lower = lower.clone();
        (0..26usize.pow(len)).map(move |mut i| {
            let mut word = vec![' '; len as usize];
            for slot in word.iter_mut().rev() {
                *slot = lower[i % 26];
                i /= 26;
            }
            word.into_iter().collect::<String>()
        })
    };
    let normal = singles
        .chain(spaced_letters)
        .chain(words(2))
        .chain(words(2).map(|w| format!("{SPACE}{w}")))
        .chain(words(3))
        .chain(words(3).map(|w| format!("{SPACE}{w}")))
        .chain(words(4));
    let missing = size.saturating_sub(tokens.len());
    for piece in normal.take(missing) {
        tokens.push(piece);
        types.push(NORMAL);
    }
    let scores = (0..tokens.len())
        .map(|i| if types[i] == NORMAL { -(i as f32) } else { 0.0 })
        .collect();
    (tokens, scores, types)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_pieces_specials_bytes_then_normal_tokens() {
        let (tokens, scores, types) = pieces(32_000);
        assert_eq!(
            (tokens.len(), scores.len(), types.len()),
            (32_000, 32_000, 32_000)
        );
        let distinct: std::collections::HashSet<_> = tokens.iter().collect();
        assert_eq!(distinct.len(), tokens.len());
        assert_eq!(&tokens[..3], ["<unk>", "<s>", "</s>"]);
        assert_eq!(
            (tokens[3 + 0x0A].as_str(), types[3 + 0x0A]),
            ("<0x0A>", BYTE)
        );
        assert_eq!(tokens[259], "\u{2581}");
        assert!(types[259..].iter().all(|&t| t == NORMAL));
    }

    #[test]
    fn every_longer_piece_is_two_shorter_pieces() {
        let (tokens, _, _) = pieces(32_000);
        let known: std::collections::HashSet<&str> = tokens.iter().map(String::as_str).collect();
        for piece in &tokens[259..] {
            let chars: Vec<char> = piece.chars().collect();
            if chars.len() > 1 {
                let head: String = chars[..chars.len() - 1].iter().collect();
                let last = chars[chars.len() - 1].to_string();
                assert!(
                    known.contains(head.as_str()) && known.contains(last.as_str()),
                    "{piece}"
                );
            }
        }
    }
}
