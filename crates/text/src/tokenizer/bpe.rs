//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`), rebuilt as a `tokenizers` BPE model.
//!
//! The GGUF vocabulary and merges become a `tokenizers::models::bpe::BPE`; the pre-tokenizer is
//! a sequence of regex splits chosen by `tokenizer.ggml.pre` (the expressions llama.cpp uses,
//! written in their Hugging Face form) followed by the byte-to-unicode mapping. The merge loop
//! of `tokenizers` (lowest rank first, leftmost on ties, `ignore_merges` for llama-3) is the
//! one llama.cpp implements, so no hand-written copy is needed here. Special tokens never reach
//! this model: [`super::special::partition`] removes them first.

use std::collections::HashMap;

use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{PreTokenizerWrapper, SplitDelimiterBehavior};

use super::TokenizerError;
use super::vocab::Vocab;

/// GPT-2's expression. llama.cpp's hand-written matcher for it also takes lone whitespace that
/// the expression leaves over, which is what the trailing `|\s+` says.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Llama 3 (and Falcon 3, Pixtral): digits in groups of up to three.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen 2: like Llama 3 but every digit on its own.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The regex splits for a `tokenizer.ggml.pre` value, applied in order, and whether whole
/// pre-tokenized words found in the vocabulary skip merging (`ignore_merges`).
fn pre_tokenizer(pre: &str) -> Result<(Vec<&'static str>, bool), TokenizerError> {
    Ok(match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => (vec![LLAMA3], true),
        "qwen2" | "deepseek-r1-qwen" => (vec![QWEN2], false),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "jina-v2-es" | "jina-v2-de" | "gigachat"
        | "mellum" => (vec![GPT2], false),
        "starcoder" | "refact" => (vec![r"\p{N}", GPT2], false),
        "default" => (
            vec![r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
            false,
        ),
        other => return Err(TokenizerError::UnsupportedPreTokenizer(other.into())),
    })
}

/// Builds the `tokenizers` pipeline for a BPE vocabulary and its `tokenizer.ggml.merges`.
pub(crate) fn build(
    vocab: &Vocab,
    merges: &[&str],
) -> Result<tokenizers::Tokenizer, TokenizerError> {
    let (regexes, ignore_merges) = pre_tokenizer(&vocab.pre)?;
    // In id order, so that a text listed twice maps to its last id, as in llama.cpp.
    let map: tokenizers::models::bpe::Vocab = (0u32..)
        .zip(&vocab.tokens)
        .map(|(id, t)| (t.text.clone(), id))
        .collect();
    let pairs = merge_pairs(merges)?;
    let model = BPE::builder()
        .vocab_and_merges(map, pairs)
        .ignore_merges(ignore_merges)
        .build()
        .map_err(|e| TokenizerError::Invalid(format!("cannot build the BPE model: {e}")))?;

    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for re in regexes {
        let split = Split::new(
            SplitPattern::Regex(re.to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| TokenizerError::Invalid(format!("pre-tokenizer regex {re:?}: {e}")))?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());

    let mut tk = tokenizers::Tokenizer::new(model);
    tk.with_pre_tokenizer(Some(Sequence::new(steps)));
    Ok(tk)
}

/// The pairs of `tokenizer.ggml.merges`, each split as llama.cpp does: at the first space
/// after the first byte.
pub(crate) fn merge_pairs(merges: &[&str]) -> Result<Vec<(String, String)>, TokenizerError> {
    merges
        .iter()
        .map(|m| {
            let split = m
                .bytes()
                .skip(1)
                .position(|b| b == b' ')
                .map(|i| i + 1)
                .filter(|&i| m.is_char_boundary(i))
                .ok_or_else(|| TokenizerError::Invalid(format!("malformed BPE merge {m:?}")))?;
            Ok((m[..split].to_owned(), m[split + 1..].to_owned()))
        })
        .collect()
}

/// GPT-2's map from bytes to printable characters, indexed by byte.
fn bytes_to_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[b as usize] = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('\0')
        };
    }
    table
}

/// The inverse of the byte-level map: the text of a BPE token back to raw bytes
/// (llama.cpp's `llama_decode_text`, including its marker for characters outside the map).
pub(crate) struct ByteDecoder(HashMap<char, u8>);

impl ByteDecoder {
    pub fn new() -> Self {
        ByteDecoder(
            bytes_to_chars()
                .iter()
                .enumerate()
                .map(|(b, &c)| (c, b as u8))
                .collect(),
        )
    }

    pub fn decode(&self, text: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        for c in text.chars() {
            match self.0.get(&c) {
                Some(&b) => out.push(b),
                None => {
                    out.extend_from_slice(b"[UNK_BYTE_0x");
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.extend_from_slice(format!("{b:02x}").as_bytes());
                    }
                    out.extend_from_slice(text.as_bytes());
                    out.push(b']');
                }
            }
        }
        out
    }
}
