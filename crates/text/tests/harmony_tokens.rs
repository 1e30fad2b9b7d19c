//! gpt-oss's harmony control tokens: `<|end|>` ends a message, not the answer, where the
//! vocabulary also has `<|return|>` and `<|call|>` (as llama.cpp reads it); a stream decoder
//! told to show control tokens prints them as their text, others still print as nothing.

use rinfer_formats::gguf::{Metadata, MetadataValue, ValueType};
use rinfer_text::tokenizer::Tokenizer;

const TOKENS: &[&str] = &[
    "a",
    "b",
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|endoftext|>",
];

fn vocabulary(tokens: &[&str]) -> Tokenizer {
    let mut meta = Metadata::default();
    let mut set = |key: &str, value: MetadataValue| meta.insert(key, value).unwrap();
    set("tokenizer.ggml.model", MetadataValue::String("gpt2".into()));
    set("tokenizer.ggml.pre", MetadataValue::String("gpt-2".into()));
    set(
        "tokenizer.ggml.tokens",
        MetadataValue::Array {
            element: ValueType::String,
            items: tokens
                .iter()
                .map(|t| MetadataValue::String(t.to_string()))
                .collect(),
        },
    );
    set(
        "tokenizer.ggml.token_type",
        MetadataValue::Array {
            element: ValueType::I32,
            items: tokens
                .iter()
                .map(|t| MetadataValue::I32(if t.starts_with("<|") { 3 } else { 1 }))
                .collect(),
        },
    );
    set(
        "tokenizer.ggml.merges",
        MetadataValue::Array {
            element: ValueType::String,
            items: Vec::new(),
        },
    );
    let eos = tokens.iter().position(|t| *t == "<|endoftext|>").unwrap();
    set(
        "tokenizer.ggml.eos_token_id",
        MetadataValue::U32(eos as u32),
    );
    Tokenizer::from_gguf(&meta).unwrap()
}

fn id(tokenizer: &Tokenizer, text: &str) -> u32 {
    tokenizer.token_id(text).unwrap()
}

#[test]
fn harmony_end_of_message_does_not_end_the_answer() {
    let t = vocabulary(TOKENS);
    assert!(!t.is_eog(id(&t, "<|end|>")));
    for text in ["<|return|>", "<|call|>", "<|endoftext|>"] {
        assert!(t.is_eog(id(&t, text)), "{text}");
    }
    assert_eq!(t.eot(), Some(id(&t, "<|return|>")));
    // Without `<|call|>` (phi-3's vocabulary has `<|end|>` alone) `<|end|>` still ends it.
    let t = vocabulary(&["a", "<|end|>", "<|return|>", "<|endoftext|>"]);
    assert!(t.is_eog(id(&t, "<|end|>")));
    assert_eq!(t.eot(), Some(id(&t, "<|end|>")));
}

#[test]
fn a_stream_decoder_shows_the_control_tokens_it_is_told_to() {
    let t = vocabulary(TOKENS);
    let shown = [id(&t, "<|channel|>"), id(&t, "<|message|>")];
    let mut decoder = t.stream_decoder().showing(&shown);
    let text: String = ["<|channel|>", "a", "<|message|>", "b", "<|start|>", "a"]
        .iter()
        .filter_map(|token| decoder.push(id(&t, token)))
        .collect();
    assert_eq!(text, "<|channel|>a<|message|>ba");
    let mut plain = t.stream_decoder();
    assert_eq!(plain.push(id(&t, "<|channel|>")), None);
}
