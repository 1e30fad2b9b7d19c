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

/// DeepSeek LLM (and DeepSeek-V2), llama.cpp's expressions applied in turn: each newline
/// alone, runs of cased letters of the alphabetic scripts with an optional leading space
/// (written as code points: some are compatibility characters an editor may normalise), runs
/// of ASCII and full-width punctuation with an optional leading space, trailing whitespace,
/// runs of CJK and Hangul, runs of digits.
const DEEPSEEK_LLM: [&str; 6] = [
    "[\r\n]",
    concat!(
        "\\s?[",
        "A-Za-z\u{b5}\u{c0}-\u{d6}\u{d8}-\u{f6}\u{f8}-\u{1ba}\u{1bc}-\u{1bf}\u{1c4}-",
        "\u{293}\u{295}-\u{2af}\u{370}-\u{373}\u{376}\u{377}\u{37b}-\u{37d}\u{37f}",
        "\u{386}\u{388}-\u{38a}\u{38c}\u{38e}-\u{3a1}\u{3a3}-\u{3f5}\u{3f7}-\u{481}",
        "\u{48a}-\u{52f}\u{531}-\u{556}\u{10a0}-\u{10c5}\u{13a0}-\u{13f5}\u{13f8}-",
        "\u{13fd}\u{1c90}-\u{1cba}\u{1cbd}-\u{1cbf}\u{1d00}-\u{1d2b}\u{1d6b}-\u{1d77}",
        "\u{1d79}-\u{1d9a}\u{1e00}-\u{1f15}\u{1f18}-\u{1f1d}\u{1f20}-\u{1f45}\u{1f48}-",
        "\u{1f4d}\u{1f50}-\u{1f57}\u{1f59}\u{1f5b}\u{1f5d}\u{1f5f}-\u{1f7d}\u{1f80}-",
        "\u{1fb4}\u{1fb6}-\u{1fbc}\u{1fbe}\u{1fc2}-\u{1fc4}\u{1fc6}-\u{1fcc}\u{1fd0}-",
        "\u{1fd3}\u{1fd6}-\u{1fdb}\u{1fe0}-\u{1fec}\u{1ff2}-\u{1ff4}\u{1ff6}-\u{1ffc}",
        "\u{2102}\u{2107}\u{210a}-\u{2113}\u{2115}\u{2119}-\u{211d}\u{2124}\u{2126}",
        "\u{2128}\u{212a}-\u{212d}\u{212f}-\u{2134}\u{2139}\u{213c}-\u{213f}\u{2145}-",
        "\u{2149}\u{214e}\u{2183}\u{2184}\u{2c00}-\u{2c7b}\u{2c7e}-\u{2ce4}\u{2ceb}-",
        "\u{2cee}\u{2cf2}\u{2cf3}\u{a640}-\u{a66d}\u{a680}-\u{a69b}\u{a722}-\u{a76f}",
        "\u{a771}-\u{a787}\u{a78b}-\u{a78e}\u{ab70}-\u{abbf}\u{fb00}-\u{fb06}\u{fb13}-",
        "\u{fb17}\u{ff21}-\u{ff3a}\u{ff41}-\u{ff5a}\u{10400}-\u{1044f}\u{104b0}-",
        "\u{104d3}\u{104d8}-\u{104fb}\u{10c80}-\u{10cb2}\u{10cc0}-\u{10cf2}\u{118a0}-",
        "\u{118df}\u{1e900}-\u{1e943}",
        "]+"
    ),
    "\\s?[!-/:-~\u{ff01}-\u{ff0f}\u{ff1a}-\u{ff5e}\u{2018}-\u{201f}\u{3000}-\u{3002}]+",
    "\\s+$",
    "[\u{4e00}-\u{9fa5}\u{800}-\u{4e00}\u{ac00}-\u{d7ff}]+",
    "\\p{N}+",
];
/// Qwen 3.5: Qwen 2's expression with combining marks counted as letters.
const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{M}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The regex splits for a `tokenizer.ggml.pre` value, applied in order, and whether whole
/// pre-tokenized words found in the vocabulary skip merging (`ignore_merges`).
fn pre_tokenizer(pre: &str) -> Result<(Vec<&'static str>, bool), TokenizerError> {
    Ok(match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => (vec![LLAMA3], true),
        "qwen2" | "deepseek-r1-qwen" => (vec![QWEN2], false),
        "deepseek-llm" => (DEEPSEEK_LLM.to_vec(), false),
        "qwen35" => (vec![QWEN35], false),
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
