//! Text for rinfer: the tokenizer (GGUF vocabularies and Hugging Face `tokenizer.json` to token
//! ids and back, streamed detokenizing) and chat templates (a conversation to a prompt, the
//! template run as untrusted code).
//!
//! This crate reads model files only through `rinfer-formats` (a `tokenizer.json` aside) and
//! never computes: it knows vocabularies and templates, not weights, devices or sequences.

#![forbid(unsafe_code)]

pub mod chat_template;
pub mod tokenizer;

pub use tokenizer::{StreamDecoder, Tokenizer, TokenizerError};
