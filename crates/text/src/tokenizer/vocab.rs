//! The vocabulary as llama.cpp's `llama_vocab` loads it from `tokenizer.ggml.*` metadata: token
//! texts, scores and types, the special ids, the end-of-generation set and the per-type flags
//! (`add_bos`, `add_space_prefix`, `clean_spaces`, ...).
//!
//! llama.cpp adjusts token types after loading (end-of-generation tokens become control tokens,
//! phi-3's special tokens strip the spaces to their right). Those adjustments change how text is
//! split, so they are reproduced here, in the same order.

use std::collections::BTreeSet;

use rinfer_formats::gguf::{Metadata, MetadataValue};

use super::TokenizerError;
use super::special::SpecialMatcher;
pub(crate) use super::token::TokenData;
pub use super::token::TokenType;
use super::token_index::TokenIndex;

/// Which tokenization algorithm the vocabulary uses (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VocabKind {
    /// `llama`: SentencePiece-style score-driven merges with byte fallback.
    Spm,
    /// `gpt2`: byte-level BPE with ranked merges and a regex pre-tokenizer.
    Bpe,
    /// `gemma4`: BPE with ranked merges over SentencePiece-style pieces (`▁` for spaces,
    /// `<0xNN>` byte fallback).
    PieceBpe,
    /// `none`: no vocabulary; the model runs on token ids alone (llama.cpp's no-vocab mode).
    None,
    /// `bert`: WordPiece; `[CLS]` (as BOS) in front and `[SEP]` (as EOS) at the end.
    Wpm,
}

/// The loaded vocabulary.
#[derive(Clone, Debug)]
pub(crate) struct Vocab {
    pub kind: VocabKind,
    /// `tokenizer.ggml.pre`, or `"default"` when absent.
    pub pre: String,
    pub tokens: Vec<TokenData>,
    /// Text → id; a text listed twice maps to its last id, as in llama.cpp.
    pub token_to_id: TokenIndex,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    /// The token of a word WordPiece cannot split.
    pub unk: Option<u32>,
    pub eog: BTreeSet<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub clean_spaces: bool,
    /// Finds the control, user-defined and unknown tokens in raw text.
    pub special: SpecialMatcher,
    /// Tokens that mark where media goes (`<start_of_image>`), ascending: user-defined, so
    /// matched in text, but never printed as generated text.
    pub media_markers: Vec<u32>,
}

/// Token texts that llama.cpp treats as end-of-turn when `tokenizer.ggml.eot_token_id` is absent.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<turn|>",
    "<|endoftext|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Token texts that llama.cpp adds to the end-of-generation set.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<turn|>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// Texts of user-defined tokens that stand for an image or other media in the model's input.
/// They are not text the model writes: [`super::Tokenizer::decode`] prints them as nothing, like
/// control tokens. (Gemma 3 declares its image markers user-defined, so llama.cpp prints them.)
const MEDIA_MARKER_TEXTS: &[&str] = &[
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
    "[multimodal]",
    "<|image|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<image>",
    "</image>",
];

/// The ids of the tokens in [`MEDIA_MARKER_TEXTS`], ascending.
pub(crate) fn media_markers(tokens: &[TokenData]) -> Vec<u32> {
    (0u32..)
        .zip(tokens)
        .filter(|(_, t)| MEDIA_MARKER_TEXTS.contains(&t.text.as_str()))
        .map(|(id, _)| id)
        .collect()
}

/// The value of `key` as `read` takes it, `None` when the key is absent; a value `read` does
/// not take is an error saying the key holds something other than `expected`.
fn typed<'a, T>(
    meta: &'a Metadata,
    key: &str,
    expected: &'static str,
    read: impl FnOnce(&'a MetadataValue) -> Option<T>,
) -> Result<Option<T>, TokenizerError> {
    meta.get(key)
        .map(|v| {
            read(v).ok_or_else(|| TokenizerError::WrongType {
                key: key.into(),
                expected,
            })
        })
        .transpose()
}

pub(super) fn int(meta: &Metadata, key: &str) -> Result<Option<i128>, TokenizerError> {
    typed(meta, key, "an integer", MetadataValue::as_i128)
}

pub(super) fn flag(meta: &Metadata, key: &str) -> Result<Option<bool>, TokenizerError> {
    typed(meta, key, "a bool", |v| match v {
        MetadataValue::Bool(b) => Some(*b),
        _ => None,
    })
}

pub(super) fn string<'a>(meta: &'a Metadata, key: &str) -> Result<Option<&'a str>, TokenizerError> {
    typed(meta, key, "a string", MetadataValue::as_str)
}

fn array<'a>(meta: &'a Metadata, key: &str) -> Result<Option<&'a [MetadataValue]>, TokenizerError> {
    typed(meta, key, "an array", MetadataValue::as_array)
}

/// Finds end-of-turn and end-of-generation tokens by their text and makes them control tokens,
/// as llama.cpp does; returns the end-of-turn id and the end-of-generation set. Ids are visited
/// in order so the result is deterministic (llama.cpp walks a hash map; only the end-of-turn id
/// can differ from it, when several of the texts are present).
pub(crate) fn detect_eog(
    tokens: &mut [TokenData],
    eos: Option<u32>,
    mut eot: Option<u32>,
    eom: Option<u32>,
) -> (Option<u32>, BTreeSet<u32>) {
    let mut eog = BTreeSet::new();
    for (id, token) in tokens.iter_mut().enumerate() {
        let text = token.text.as_str();
        if eot.is_none() && EOT_TEXTS.contains(&text) {
            eot = Some(id as u32);
            token.ty = TokenType::Control;
        }
        if EOG_TEXTS.contains(&text) {
            eog.insert(id as u32);
            token.ty = TokenType::Control;
        }
    }
    eog.extend(eos);
    eog.extend(eot);
    eog.extend(eom);
    harmony_end_continues(tokens, &mut eot, &mut eog);
    (eot, eog)
}

/// gpt-oss's harmony format ends a message with `<|end|>` and the answer with `<|return|>` or
/// `<|call|>`: where all three are end-of-generation tokens, `<|end|>` is taken out of the set
/// (as llama.cpp does), so that the reasoning message does not end the answer; the end of turn
/// is then `<|return|>`.
fn harmony_end_continues(tokens: &[TokenData], eot: &mut Option<u32>, eog: &mut BTreeSet<u32>) {
    let find = |text: &str| {
        eog.iter()
            .copied()
            .find(|&id| tokens.get(id as usize).is_some_and(|t| t.text == text))
    };
    let (Some(end), Some(ret), Some(_call)) =
        (find("<|end|>"), find("<|return|>"), find("<|call|>"))
    else {
        return;
    };
    eog.remove(&end);
    if *eot == Some(end) {
        *eot = Some(ret);
    }
}

/// Control, user-defined and unknown tokens, longest text first (ties in id order).
pub(crate) fn special_tokens_by_length(tokens: &[TokenData]) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..tokens.len() as u32)
        .filter(|&id| {
            matches!(
                tokens[id as usize].ty,
                TokenType::Control | TokenType::UserDefined | TokenType::Unknown
            )
        })
        .collect();
    ids.sort_by_key(|&id| std::cmp::Reverse(tokens[id as usize].text.len()));
    ids
}

impl Vocab {
    /// Loads the vocabulary the way `llama_vocab::impl::load` does.
    pub fn from_gguf(meta: &Metadata) -> Result<Self, TokenizerError> {
        const MODEL: &str = "tokenizer.ggml.model";
        let model =
            string(meta, MODEL)?.ok_or_else(|| TokenizerError::MissingKey { key: MODEL.into() })?;
        let kind = match model {
            "llama" => VocabKind::Spm,
            "gpt2" => VocabKind::Bpe,
            "gemma4" => VocabKind::PieceBpe,
            "none" => return Self::empty(),
            "bert" => VocabKind::Wpm,
            other => return Err(TokenizerError::UnsupportedModel(other.into())),
        };
        let pre = string(meta, "tokenizer.ggml.pre")?
            .unwrap_or("default")
            .to_owned();

        const TOKENS: &str = "tokenizer.ggml.tokens";
        let texts = array(meta, TOKENS)?
            .ok_or_else(|| TokenizerError::MissingKey { key: TOKENS.into() })?;
        let scores = array(meta, "tokenizer.ggml.scores")?;
        let types = array(meta, "tokenizer.ggml.token_type")?;
        for (key, arr) in [
            ("tokenizer.ggml.scores", scores),
            ("tokenizer.ggml.token_type", types),
        ] {
            if let Some(a) = arr
                && a.len() != texts.len()
            {
                return Err(TokenizerError::LengthMismatch {
                    key: key.into(),
                    len: a.len(),
                    n_tokens: texts.len(),
                });
            }
        }
        if texts.is_empty() || texts.len() > u32::MAX as usize {
            return Err(TokenizerError::Invalid(format!(
                "{TOKENS} holds {} tokens",
                texts.len()
            )));
        }

        let mut tokens = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let text = t.as_str().ok_or_else(|| TokenizerError::WrongType {
                key: TOKENS.into(),
                expected: "an array of strings",
            })?;
            let score = scores.and_then(|s| s[i].as_f64()).map_or(0.0, |f| f as f32);
            let ty = types
                .and_then(|s| s[i].as_i128())
                .map_or(TokenType::Normal, TokenType::from_gguf);
            tokens.push(TokenData {
                text: text.to_owned(),
                score,
                ty,
                lstrip: false,
                rstrip: false,
            });
        }
        let n_tokens = tokens.len();
        let token_to_id = TokenIndex::new(&tokens);

        // Per-type defaults, then the metadata overrides them.
        let (mut bos, mut eos, mut add_bos, mut add_space_prefix, mut clean_spaces) = match kind {
            VocabKind::Spm => (Some(1), Some(2), true, true, false),
            VocabKind::Bpe => (None, None, false, false, true),
            VocabKind::PieceBpe | VocabKind::None => (None, None, true, false, false),
            VocabKind::Wpm => (Some(101), Some(102), true, false, true),
        };
        if kind == VocabKind::Bpe {
            match pre.as_str() {
                "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => add_bos = true,
                "qwen2" | "qwen35" | "deepseek-r1-qwen" | "deepseek-llm" => clean_spaces = false,
                _ => {}
            }
        }
        let mut add_eos = kind == VocabKind::Wpm;
        if let Some(v) = flag(meta, "tokenizer.ggml.add_space_prefix")? {
            add_space_prefix = v;
        }
        if let Some(v) = flag(meta, "tokenizer.ggml.add_bos_token")? {
            add_bos = v;
        }
        // llama.cpp adds BOS for Gemma 4 whatever the file says.
        add_bos |= kind == VocabKind::PieceBpe;
        if let Some(v) = flag(meta, "tokenizer.ggml.add_eos_token")? {
            add_eos = v;
        }

        let id_key = |key: &str| -> Result<Option<u32>, TokenizerError> {
            match int(meta, key)? {
                None => Ok(None),
                Some(id) if id >= 0 && (id as u128) < n_tokens as u128 => Ok(Some(id as u32)),
                Some(id) => Err(TokenizerError::IdOutOfRange {
                    key: key.into(),
                    id,
                    n_tokens,
                }),
            }
        };
        if let Some(id) = id_key("tokenizer.ggml.bos_token_id")? {
            bos = Some(id);
        }
        if let Some(id) = id_key("tokenizer.ggml.eos_token_id")? {
            eos = Some(id);
        }
        let mut unk = id_key("tokenizer.ggml.unknown_token_id")?;
        if kind == VocabKind::Wpm {
            // llama.cpp adds `[CLS]` and `[SEP]` around a WordPiece text.
            if let Some(id) = id_key("tokenizer.ggml.cls_token_id")? {
                bos = Some(id);
            }
            if let Some(id) = id_key("tokenizer.ggml.seperator_token_id")? {
                eos = Some(id);
            }
            unk = unk.or(Some(100)).filter(|&id| (id as usize) < n_tokens);
        }
        let eot = id_key("tokenizer.ggml.eot_token_id")?;
        let eom = id_key("tokenizer.ggml.eom_token_id")?;
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingKey {
                key: "tokenizer.ggml.bos_token_id (tokenizer.ggml.add_bos_token is set)".into(),
            });
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingKey {
                key: "tokenizer.ggml.eos_token_id (tokenizer.ggml.add_eos_token is set)".into(),
            });
        }

        let (eot, eog) = detect_eog(&mut tokens, eos, eot, eom);

        let special_tokens = special_tokens_by_length(&tokens);

        // llama.cpp: phi-3's special tokens eat the whitespace to their right, except these.
        let name = match meta.get("general.name") {
            Some(v) => v.as_str().unwrap_or("").to_lowercase(),
            None => String::new(),
        };
        if name.contains("phi-3") || name.contains("phi3") {
            for &id in &special_tokens {
                tokens[id as usize].rstrip = true;
            }
            let mut set = |text: &str, value: bool| {
                if let Some(id) = token_to_id.get(&tokens, text) {
                    tokens[id as usize].rstrip = value;
                }
            };
            set("</s>", true);
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                set(text, false);
            }
        }
        let special = SpecialMatcher::new(&tokens, &special_tokens)?;
        let media_markers = media_markers(&tokens);

        Ok(Vocab {
            kind,
            pre,
            tokens,
            token_to_id,
            bos,
            eos,
            eot,
            unk,
            eog,
            add_bos,
            add_eos,
            add_space_prefix,
            clean_spaces,
            special,
            media_markers,
        })
    }

    /// No tokens at all (`tokenizer.ggml.model = "none"`): ids pass through, text cannot.
    fn empty() -> Result<Self, TokenizerError> {
        Ok(Vocab {
            kind: VocabKind::None,
            pre: "default".to_owned(),
            tokens: Vec::new(),
            token_to_id: TokenIndex::new(&[]),
            bos: None,
            eos: None,
            eot: None,
            unk: None,
            eog: BTreeSet::new(),
            add_bos: false,
            add_eos: false,
            add_space_prefix: false,
            clean_spaces: false,
            special: SpecialMatcher::new(&[], &[])?,
            media_markers: Vec::new(),
        })
    }

    /// The id of a token text.
    pub fn text_to_token(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(&self.tokens, text)
    }

    /// The byte-fallback token of an SPM vocabulary: `<0xAB>`, or else the byte itself.
    pub fn byte_to_token(&self, byte: u8) -> Option<u32> {
        self.text_to_token(&format!("<0x{byte:02X}>")).or_else(|| {
            let s = [byte];
            std::str::from_utf8(&s)
                .ok()
                .and_then(|s| self.text_to_token(s))
        })
    }
}
