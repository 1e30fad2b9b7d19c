//! A Hugging Face `tokenizer.json`, run by the `tokenizers` crate.
//!
//! Encoding and decoding are Hugging Face's. What this module adds is the vocabulary view the
//! rest of [`super`] relies on: token types (special added tokens are control tokens, other
//! added tokens user-defined), each token's bytes for streaming, BOS/EOS from
//! `tokenizer_config.json`, and the end-of-generation set found as llama.cpp finds it.

use serde_json::Value;

use super::TokenizerError;
use super::bpe::ByteDecoder;
use super::pieces::Pieces;
use super::special::SpecialMatcher;
use super::token_index::TokenIndex;
use super::vocab::{
    TokenData, TokenType, Vocab, VocabKind, detect_eog, media_markers, special_tokens_by_length,
};

/// The two `tokenizers` pipelines of one file: one that matches special tokens in the text
/// and one that treats them as plain text.
pub(crate) struct HfTokenizer {
    parse_special: tokenizers::Tokenizer,
    literal: tokenizers::Tokenizer,
}

impl HfTokenizer {
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, tokenizers::Error> {
        let tk = if parse_special {
            &self.parse_special
        } else {
            &self.literal
        };
        Ok(tk.encode(text, add_special)?.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        // Decoding only fails for ids the decoder cannot map; those are dropped by
        // `tokenizers` already, so an error leaves nothing to show.
        self.parse_special.decode(ids, true).unwrap_or_default()
    }
}

/// A special-token entry of `tokenizer_config.json`: a string or `{"content": ...}`.
fn config_token(config: &Value, key: &str) -> Option<String> {
    match config.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// Loads `tokenizer.json` (and optionally `tokenizer_config.json`).
pub(crate) fn load(
    json: &str,
    config: Option<&str>,
) -> Result<(Vocab, HfTokenizer, Pieces), TokenizerError> {
    let invalid = |e: &dyn std::fmt::Display| TokenizerError::Invalid(e.to_string());
    let parse_special: tokenizers::Tokenizer = json.parse().map_err(|e| invalid(&e))?;
    let raw: Value = serde_json::from_str(json).map_err(|e| invalid(&e))?;
    let config: Value = match config {
        Some(c) => {
            serde_json::from_str(c).map_err(|e| invalid(&format!("tokenizer_config.json: {e}")))?
        }
        None => Value::Null,
    };
    let mut literal = parse_special.clone();
    literal.set_encode_special_tokens(true);

    let byte_level = parse_special
        .get_decoder()
        .and_then(|d| serde_json::to_string(d).ok())
        .is_some_and(|d| d.contains("\"ByteLevel\""));
    let byte_fallback = raw
        .pointer("/model/byte_fallback")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let added = parse_special.get_added_tokens_decoder();
    let n = parse_special.get_vocab_size(true);
    let byte_decoder = ByteDecoder::new();
    let mut tokens = Vec::with_capacity(n);
    let mut pieces = Vec::with_capacity(n);
    for id in 0..n as u32 {
        let text = parse_special.id_to_token(id).unwrap_or_default();
        let byte = byte_fallback
            .then(|| super::parse_byte_token(&text))
            .flatten();
        let ty = match added.get(&id) {
            Some(t) if t.special => TokenType::Control,
            Some(_) => TokenType::UserDefined,
            None if byte.is_some() => TokenType::Byte,
            None => TokenType::Normal,
        };
        pieces.push(match (ty, byte) {
            (TokenType::Control | TokenType::UserDefined, _) => text.as_bytes().to_vec(),
            (_, Some(b)) => vec![b],
            _ if byte_level => byte_decoder.decode(&text),
            _ => text.replace('\u{2581}', " ").into_bytes(),
        });
        tokens.push(TokenData {
            text,
            score: 0.0,
            ty,
            lstrip: false,
            rstrip: false,
        });
    }
    let token_to_id = TokenIndex::new(&tokens);
    let lookup = |key: &str| config_token(&config, key).and_then(|t| token_to_id.get(&tokens, &t));
    let bos = lookup("bos_token");
    let eos = lookup("eos_token");
    let (eot, eog) = detect_eog(&mut tokens, eos, None, None);
    // Whether the post-processor adds BOS is what matters, whatever the config says.
    let add_bos = bos.is_some_and(|b| {
        parse_special
            .encode("a", true)
            .is_ok_and(|e| e.get_ids().first() == Some(&b))
    });
    let add_eos = eos.is_some_and(|b| {
        parse_special
            .encode("a", true)
            .is_ok_and(|e| e.get_ids().last() == Some(&b))
    });
    let special_tokens = special_tokens_by_length(&tokens);
    let special = SpecialMatcher::new(&tokens, &special_tokens)?;
    let media_markers = media_markers(&tokens);
    let vocab = Vocab {
        kind: if byte_level {
            VocabKind::Bpe
        } else {
            VocabKind::Spm
        },
        pre: String::new(),
        tokens,
        token_to_id,
        bos,
        eos,
        eot,
        unk: None,
        eog,
        add_bos,
        add_eos,
        add_space_prefix: false,
        clean_spaces: false,
        special,
        media_markers,
    };
    Ok((
        vocab,
        HfTokenizer {
            parse_special,
            literal,
        },
        pieces.into_iter().collect(),
    ))
}
